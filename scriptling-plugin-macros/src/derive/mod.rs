//! `#[derive(FromValue)]` and `#[derive(IntoValue)]`: the type read into a
//! model (names after renaming, defaults, skips), checked once for both
//! derives, then written out by `from_value.rs` or `into_value.rs`.
//!
//! The value forms (documented on the derives in `lib.rs`):
//!
//! | Rust | Scriptling |
//! |---|---|
//! | `struct S { a: A, b: B }` | `{"a": .., "b": ..}` |
//! | `struct S(A)` | what `A` is |
//! | `struct S(A, B)` | `[a, b]` |
//! | `struct S;` | `None` |
//! | `enum E { A, B }` | `"A"`, `"B"` |
//! | `enum E { A(X), B(X, Y), C { x: X } }` | `{"A": x}`, `{"B": [x, y]}`, `{"C": {"x": ..}}` |

mod case;
mod from_value;
mod into_value;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Data, DeriveInput, Expr, Fields, GenericParam, Generics, Ident, Type, WherePredicate};

use crate::attrs;
use crate::errors::Errors;

/// Which derive is being expanded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trait {
    FromValue,
    IntoValue,
}

impl Trait {
    fn name(self) -> &'static str {
        match self {
            Trait::FromValue => "FromValue",
            Trait::IntoValue => "IntoValue",
        }
    }
}

/// A field's value when its key is missing (or it is skipped).
enum Fallback {
    /// `Default::default()` (`#[scriptling(default)]`, or `skip` alone).
    Default,
    /// The expression given (`#[scriptling(default = <expr>)]`).
    Expr(Expr),
    /// The field of the type's own `Default::default()` (`#[scriptling(default)]`
    /// on the type, serde's meaning).
    Container,
}

/// A named field.
struct Field {
    ident: Ident,
    ty: Type,
    /// The key it has in a dict.
    key: String,
    read: Read,
}

/// How a named field is read from its dict.
enum Read {
    /// Its key must be there (an `Option` may be left out).
    Required,
    /// From its key, or the fallback when the key is missing.
    Defaulted(Fallback),
    /// Never: always the fallback, and never written either.
    Skipped(Fallback),
}

impl Field {
    fn skipped(&self) -> bool {
        matches!(self.read, Read::Skipped(_))
    }
}

enum Shape {
    /// `{ a: A, .. }`: a dict.
    Named(Vec<Field>),
    /// `(A, ..)`: one field is the value itself, several a list.
    Tuple(Vec<Type>),
    /// No fields.
    Unit,
}

struct Variant {
    ident: Ident,
    /// Its name in Scriptling.
    key: String,
    shape: Shape,
}

enum Body {
    Struct(Shape),
    Enum(Vec<Variant>),
}

/// The type being derived for, as the generators need it.
struct Model {
    ident: Ident,
    generics: Generics,
    body: Body,
}

pub(crate) fn expand(input: TokenStream, which: Trait) -> TokenStream {
    let input = match syn::parse2::<DeriveInput>(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Errors::default();
    let model = read(&input, which, &mut errors);
    match errors.finish() {
        Ok(()) => match which {
            Trait::FromValue => from_value::generate(&model),
            Trait::IntoValue => into_value::generate(&model),
        },
        // An impl that type-checks, so uses of the type add no errors to
        // the ones that explain the mistake.
        Err(e) => crate::errors::with_item(stand_in(&model, which), &e),
    }
}

/// An impl of `which` that type-checks and is never called.
fn stand_in(model: &Model, which: Trait) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let header = impl_header(model, which);
    let method = match which {
        Trait::FromValue => {
            quote!(fn from_value(_: #krate::Value) -> ::core::result::Result<Self, #krate::FromValueError>)
        }
        Trait::IntoValue => {
            quote!(fn into_value(self) -> ::core::result::Result<#krate::Value, #krate::IntoValueError>)
        }
    };
    quote!(#header { #method { ::core::unreachable!("this type failed to compile") } })
}

fn read(input: &DeriveInput, which: Trait, errors: &mut Errors) -> Model {
    check_generics(&input.generics, which, errors);
    let container = options(&input.attrs, &attrs::CONTAINER, errors);
    let rule = container.str("rename_all").and_then(|rule| {
        let named = case::Rule::named(&rule.value());
        if named.is_none() {
            let list = crate::errors::quoted(case::Rule::names(), '"');
            errors.at(&rule, format!("unknown `rename_all` rule; expected one of: {list}"));
        }
        named
    });
    let rename = |name: &str| rule.map_or_else(|| name.to_owned(), |rule| rule.apply(name));
    let container_default = container.flag("default");
    if container_default && !matches!(&input.data, Data::Struct(s) if matches!(s.fields, Fields::Named(_))) {
        errors.at(
            &input.ident,
            "#[scriptling(default)] on a type goes on a struct with named fields: missing keys take the \
             fields of `Default::default()`",
        );
    }
    let body = match &input.data {
        Data::Struct(s) => {
            let mut shape = shape(&s.fields, &rename, errors);
            if let (Shape::Named(fields), true) = (&mut shape, container_default) {
                for field in fields.iter_mut().filter(|f| matches!(f.read, Read::Required)) {
                    field.read = Read::Defaulted(Fallback::Container);
                }
            }
            Body::Struct(shape)
        }
        Data::Enum(e) => Body::Enum(
            e.variants
                .iter()
                .map(|v| {
                    let options = options(&v.attrs, &attrs::VARIANT, errors);
                    let key =
                        options.str("rename").map_or_else(|| rename(&crate::params::unraw(&v.ident)), |s| s.value());
                    // Fields of a struct variant keep their own names.
                    Variant { ident: v.ident.clone(), key, shape: shape(&v.fields, &|n: &str| n.to_owned(), errors) }
                })
                .collect(),
        ),
        Data::Union(u) => {
            errors
                .at(u.union_token, format!("{} cannot be derived for a union: use a struct or an enum", which.name()));
            Body::Struct(Shape::Unit)
        }
    };
    Model { ident: input.ident.clone(), generics: input.generics.clone(), body }
}

/// The fields, with their keys (renamed by `rename` unless given) and options.
fn shape(fields: &Fields, rename: &dyn Fn(&str) -> String, errors: &mut Errors) -> Shape {
    match fields {
        Fields::Named(named) => Shape::Named(
            named
                .named
                .iter()
                .map(|f| {
                    let ident = f.ident.clone().expect("named");
                    let options = options(&f.attrs, &attrs::FIELD, errors);
                    let name = crate::params::unraw(&ident);
                    let key = options.str("rename").map_or_else(|| rename(&name), |s| s.value());
                    let fallback = options.expr("default").map(Fallback::Expr);
                    let read = if options.flag("skip") {
                        Read::Skipped(fallback.unwrap_or(Fallback::Default))
                    } else if let Some(fallback) = fallback.or(options.flag("default").then_some(Fallback::Default)) {
                        Read::Defaulted(fallback)
                    } else {
                        Read::Required
                    };
                    Field { ident, ty: f.ty.clone(), key, read }
                })
                .collect(),
        ),
        Fields::Unnamed(unnamed) => Shape::Tuple(
            unnamed
                .unnamed
                .iter()
                .map(|f| {
                    if let Some(attr) = f.attrs.iter().find(|a| a.path().is_ident("scriptling")) {
                        errors.at(attr, "#[scriptling] options go on named fields; a tuple's items have no keys");
                    }
                    f.ty.clone()
                })
                .collect(),
        ),
        Fields::Unit => Shape::Unit,
    }
}

/// The `#[scriptling(...)]` options among `attrs`.
fn options(attrs: &[syn::Attribute], spec: &attrs::Spec, errors: &mut Errors) -> attrs::Options {
    let mut options = attrs::Options::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("scriptling")) {
        spec.parse_attr_into(attr, &mut options, errors);
    }
    options
}

/// A type parameter with no bound at all is refused with the bound to
/// write: the derive adds no bounds of its own, so what a generic type
/// needs is visible where it is declared. Whether a bound implies the
/// trait (`T: FromValue`, or a trait of the user's with it as a supertrait)
/// is the compiler's to say. Lifetimes cannot come from a value.
fn check_generics(generics: &Generics, which: Trait, errors: &mut Errors) {
    let bounded = |ident: &Ident| {
        let declared = generics.type_params().any(|p| p.ident == *ident && !p.bounds.is_empty());
        let in_where = generics.where_clause.iter().flat_map(|w| &w.predicates).any(|pred| match pred {
            WherePredicate::Type(t) => {
                matches!(&t.bounded_ty, Type::Path(p) if p.path.is_ident(ident)) && !t.bounds.is_empty()
            }
            _ => false,
        });
        declared || in_where
    };
    for param in &generics.params {
        match param {
            GenericParam::Type(t) if !bounded(&t.ident) => {
                let (ident, name) = (&t.ident, which.name());
                let article = if name.starts_with('I') { "an" } else { "a" };
                errors.at(
                    ident,
                    format!("`{ident}` needs {article} `{name}` bound to derive `{name}`: write `{ident}: {name}`"),
                );
            }
            GenericParam::Lifetime(l) if which == Trait::FromValue => errors
                .at(l, "FromValue cannot be derived for a type that borrows: values arrive owned, so use owned fields"),
            _ => {}
        }
    }
}

/// `impl<..> ::scriptling_plugin::<Trait> for Type<..> where ..`, the
/// header every generated impl shares.
fn impl_header(model: &Model, which: Trait) -> TokenStream {
    let ident = &model.ident;
    let trait_ident = Ident::new(which.name(), Span::call_site());
    let (impl_generics, type_generics, where_clause) = model.generics.split_for_impl();
    quote!(impl #impl_generics ::scriptling_plugin::#trait_ident for #ident #type_generics #where_clause)
}

/// `'a', 'b'`, as a message lists keys.
fn quoted_list(names: &[&str]) -> String {
    crate::errors::quoted(names, '\'')
}
