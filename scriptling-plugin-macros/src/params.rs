//! Parameters of an exported callable: names, types, defaults, and the
//! checks that make misuse a compile error at the offending tokens.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, FnArg, Ident, Pat, Token, Type};

use crate::attrs;
use crate::errors::Errors;

/// One parameter that takes a Scriptling argument.
pub(crate) struct Param {
    /// The Scriptling name (the keyword), without any `r#`.
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) default: Option<Expr>,
}

/// Reads the typed parameters, removing this crate's `#[arg(...)]`
/// attributes from `inputs` so the function can be re-emitted as plain Rust.
/// Receivers are left to the caller.
pub(crate) fn analyze(inputs: &mut Punctuated<FnArg, Token![,]>, errors: &mut Errors) -> Vec<Param> {
    let mut params = Vec::new();
    for input in inputs.iter_mut() {
        let FnArg::Typed(typed) = input else { continue };
        let default = take_arg_attrs(&mut typed.attrs, errors);
        let name = match &*typed.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => unraw(&p.ident),
            other => {
                errors.at(other, "parameters must be plain names: each name is also the argument's keyword");
                continue;
            }
        };
        check_type(&typed.ty, errors);
        params.push(Param { name, ty: (*typed.ty).clone(), default });
    }
    params
}

/// The identifier as Scriptling sees it (`r#type` is `type`).
pub(crate) fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map_or_else(|| s.clone(), str::to_owned)
}

fn take_arg_attrs(attrs: &mut Vec<syn::Attribute>, errors: &mut Errors) -> Option<Expr> {
    let mut default = None;
    attrs.retain(|attr| {
        if !attr.path().is_ident("arg") {
            return true;
        }
        let parsed = match &attr.meta {
            syn::Meta::List(list) => attrs::parse_opts.parse2(list.tokens.clone()),
            other => Err(syn::Error::new_spanned(other, "expected `#[arg(default = <expr>)]`")),
        };
        match parsed {
            Ok(opts) => {
                for opt in opts {
                    if opt.key == "default" {
                        match opt.value {
                            Some(_) if default.is_some() => errors.at(&opt.key, "`default` is given twice"),
                            Some(value) => default = Some(value),
                            None => errors.at(&opt.key, "`default` needs a value: `#[arg(default = <expr>)]`"),
                        }
                    } else {
                        errors.push(attrs::unknown(&opt.key, "#[arg]", &["default"]));
                    }
                }
            }
            Err(e) => errors.push(e),
        }
        false
    });
    default
}

fn check_type(ty: &Type, errors: &mut Errors) {
    match ty {
        Type::Reference(r) => errors.at(
            r,
            "parameter types must be owned, because arguments are converted from Scriptling values: \
             use `String` instead of `&str`, `Vec<T>` instead of `&[T]`",
        ),
        Type::ImplTrait(t) => errors.at(t, "`impl Trait` parameters are not supported: use a concrete type"),
        other if has_lifetime(other.to_token_stream()) => {
            errors.at(other, "lifetimes in parameter types are not supported: use an owned type")
        }
        _ => {}
    }
}

fn has_lifetime(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Punct(p) => p.as_char() == '\'',
        TokenTree::Group(g) => has_lifetime(g.stream()),
        _ => false,
    })
}

/// The default as an expression of the parameter's type. A string literal
/// goes through `Into`, so `"Hello"` works for a `String` parameter; any other
/// expression must already have the parameter's type (so an integer literal
/// takes the parameter's integer type instead of falling back to `i32`).
pub(crate) fn default_value(expr: &Expr) -> TokenStream {
    match expr {
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(_), .. }) => quote::quote!(::core::convert::Into::into(#expr)),
        other => other.to_token_stream(),
    }
}

/// How a default expression reads in Scriptling help text.
pub(crate) fn shown_default(expr: &Expr) -> String {
    match expr {
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) => if b.value { "True" } else { "False" }.to_owned(),
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => format!("{:?}", s.value()),
        Expr::Path(p) if p.path.is_ident("None") => "None".to_owned(),
        other => other.to_token_stream().to_string(),
    }
}
