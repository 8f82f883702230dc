//! `#[plugin_class]`: on a struct, its identity (`PluginClass` and
//! `IntoValue`); on its impl block, its constructor, methods, properties and
//! destroy hook (`PluginClassMethods`). The two expansions never share state:
//! they meet through the traits.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, ImplItem, ImplItemFn, Item, ItemImpl, ItemStruct, LitStr, ReturnType, Type};

use crate::attrs;
use crate::docs;
use crate::errors::{self, Errors};
use crate::params::{self, Param};
use crate::shim::{self, Receiver, Shim, Target};

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Struct(s)) => expand_struct(attr, s),
        Ok(Item::Impl(i)) => expand_impl(attr, i),
        Ok(Item::Fn(f)) => {
            let err = syn::Error::new(
                f.sig.fn_token.span,
                "#[plugin_class] goes on a struct and on its impl block; for a function use #[plugin_fn]",
            );
            // The function was meant as one: describe it, so registering
            // it adds no error of its own.
            crate::plugin_fn::misplaced(f, err)
        }
        Ok(other) => errors::with_item(
            item,
            &syn::Error::new(errors::item_span(&other), "#[plugin_class] goes on a struct and on its impl block"),
        ),
        Err(e) => errors::with_item(item, &e),
    }
}

// ---- the struct ----------------------------------------------------------------

fn expand_struct(attr: TokenStream, item: ItemStruct) -> TokenStream {
    let mut errors = Errors::default();
    let options = attrs::PLUGIN_CLASS.parse(attr, &mut errors);
    if !item.generics.params.is_empty() {
        errors.at(
            &item.generics,
            "plugin classes cannot be generic: Scriptling constructs one concrete class; \
             wrap a concrete instantiation in a struct of its own",
        );
    }
    with_identity(item, &options, errors.finish().err())
}

/// The struct, its identity and `error` if any. The identity is emitted
/// even with an error (a wrong option, or the struct under the wrong
/// attribute), so the impl block and the registration add none of their own.
pub(crate) fn with_identity(item: ItemStruct, options: &attrs::Options, error: Option<syn::Error>) -> TokenStream {
    let identity = identity(&item, options);
    errors::with_errors(quote!(#item #identity), error)
}

/// `generics` with each type parameter bounded as a class needs it to be.
fn class_bounds(generics: &syn::Generics) -> syn::Generics {
    let mut generics = generics.clone();
    for param in generics.type_params_mut() {
        param.bounds.push(syn::parse_quote!(::core::marker::Send));
        param.bounds.push(syn::parse_quote!(::core::marker::Sync));
        param.bounds.push(syn::parse_quote!('static));
    }
    generics
}

/// `PluginClass` (name, description, wrapper) and `IntoValue` for the struct.
///
/// A generic struct (an error reported beside) gets them for every
/// instantiation a class could be, so its uses add no errors.
fn identity(item: &ItemStruct, options: &attrs::Options) -> TokenStream {
    let ident = &item.ident;
    let generics = class_bounds(&item.generics);
    let (impl_generics, type_generics, where_clause) = generics.split_for_impl();
    let name = options.str("name").map_or_else(|| params::unraw(ident), |s| s.value());
    let doc = docs::doc_text(&item.attrs);
    let krate = quote!(::scriptling_plugin);
    let source = options
        .str("wrapper")
        .map(|w| quote!(const SOURCE: ::core::option::Option<&'static str> = ::core::option::Option::Some(#w);));
    // Spanned at the struct's name, so a non-Send/Sync field is reported there.
    let class = quote_spanned! {ident.span()=>
        impl #impl_generics #krate::PluginClass for #ident #type_generics #where_clause {
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #doc;
            #source
        }
    };
    quote! {
        #class

        impl #impl_generics #krate::IntoValue for #ident #type_generics #where_clause {
            fn into_value(self) -> ::core::result::Result<#krate::Value, #krate::IntoValueError> {
                #krate::into_object(self)
            }
        }
    }
}

// ---- the impl block --------------------------------------------------------------

/// What a function in the impl block is for.
enum Role {
    Constructor,
    Method { name: Option<LitStr> },
    Property { name: Option<LitStr>, settable: bool, attr: TokenStream },
    Destroy,
}

struct Member {
    item: ImplItemFn,
    role: Role,
    /// `None`: no `self`.
    receiver: Option<Receiver>,
    params: Vec<Param>,
    doc: String,
}

impl Member {
    fn exported_name(&self) -> String {
        let ident = &self.item.sig.ident;
        match &self.role {
            Role::Method { name: Some(n) } | Role::Property { name: Some(n), .. } => n.value(),
            _ => params::unraw(ident),
        }
    }

    /// The shim that exports this member of class `self_ty` as `name`.
    fn shim<'a>(&'a self, self_ty: &'a Type, name: TokenStream) -> Shim<'a> {
        let sig = &self.item.sig;
        let ident = &sig.ident;
        let target = match (&self.role, self.receiver) {
            (Role::Constructor, None) => Target::Constructor(self_ty),
            // Any member with `self` (a constructor with one is reported,
            // and still called as a method so it type-checks).
            (_, Some(receiver)) => Target::Method(self_ty, receiver),
            (_, None) => Target::Function,
        };
        Shim { target, ..Shim::new(sig, name, quote!(<#self_ty>::#ident), &self.params, &self.doc) }
    }
}

fn expand_impl(attr: TokenStream, mut item: ItemImpl) -> TokenStream {
    let mut errors = Errors::default();
    attrs::PLUGIN_CLASS_IMPL.parse(attr, &mut errors);
    if let Some((_, path, _)) = &item.trait_ {
        errors.at(path, "#[plugin_class] goes on the class's inherent impl block (`impl Counter`), not a trait impl");
    }
    let mut members = Vec::new();
    for impl_item in &mut item.items {
        if let ImplItem::Fn(f) = impl_item {
            members.push(analyze_member(f, &mut errors));
        }
    }
    if item.trait_.is_some() || !item.generics.params.is_empty() {
        // A trait impl is reported above, and generics by the struct's
        // attribute: these members are not the class's to check. The
        // stand-in adds no errors, with an implementation for every
        // instantiation the struct's identity covers.
        return stand_in(&item, &members, errors.finish().err());
    }
    let setters = pair_setters(&members, &mut errors);
    check_members(&item, &members, &mut errors);
    match errors.finish() {
        Ok(()) => generate(&item, &members, &setters),
        Err(e) => stand_in(&item, &members, Some(e)),
    }
}

/// Reads a function's role attributes (removing them), receiver and
/// parameters.
fn analyze_member(f: &mut ImplItemFn, errors: &mut Errors) -> Member {
    let role = take_role(&mut f.attrs, errors);
    let sig = &mut f.sig;
    if !sig.generics.params.is_empty() {
        errors.at(&sig.generics, "plugin class methods cannot be generic");
    }
    let receiver = match sig.inputs.first() {
        Some(FnArg::Receiver(r)) => {
            if r.colon_token.is_some() {
                errors.at(r, "unsupported receiver: use `&self` or `&mut self`");
            } else if r.reference.is_none() {
                errors.at(
                    r,
                    "methods take `&self` or `&mut self`: `self` by value would consume an object that Scriptling still holds",
                );
            } else if let Some((_, Some(lt))) = &r.reference {
                errors.at(lt, "lifetimes on `self` are not supported: write `&self` or `&mut self`");
            }
            Some(if r.mutability.is_some() { Receiver::Exclusive } else { Receiver::Shared })
        }
        _ => None,
    };
    let params = params::analyze(&mut sig.inputs, errors);
    let doc = docs::doc_text(&f.attrs);
    let role = role.unwrap_or(Role::Method { name: None });
    Member { item: f.clone(), role, receiver, params, doc }
}

fn take_role(attrs: &mut Vec<Attribute>, errors: &mut Errors) -> Option<Role> {
    let mut role: Option<Role> = None;
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        let path = attr.path();
        let mut options = attrs::Options::default();
        let new = if path.is_ident("constructor") {
            attrs::CONSTRUCTOR.parse_attr_into(&attr, &mut options, errors);
            Role::Constructor
        } else if path.is_ident("del") {
            attrs::DEL.parse_attr_into(&attr, &mut options, errors);
            Role::Destroy
        } else if path.is_ident("property") {
            attrs::PROPERTY.parse_attr_into(&attr, &mut options, errors);
            Role::Property { name: options.str("name"), settable: options.flag("settable"), attr: quote!(#attr) }
        } else if path.is_ident("plugin_fn") {
            attrs::METHOD.parse_attr_into(&attr, &mut options, errors);
            Role::Method { name: options.str("name") }
        } else {
            kept.push(attr);
            continue;
        };
        if role.is_some() {
            errors.at(&attr, "a function can have only one of #[constructor], #[property], #[del] and #[plugin_fn]");
        } else {
            role = Some(new);
        }
    }
    *attrs = kept;
    role
}

/// Finds the `set_<name>` setter of each settable property; the setters are
/// not exported as methods. Returns (property index, setter index) pairs.
fn pair_setters(members: &[Member], errors: &mut Errors) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let Role::Property { settable: true, attr, .. } = &m.role else { continue };
        let getter = &m.item.sig.ident;
        let wanted = format!("set_{}", params::unraw(getter));
        let found = members
            .iter()
            .position(|s| matches!(s.role, Role::Method { name: None }) && params::unraw(&s.item.sig.ident) == wanted);
        match found {
            Some(j) => pairs.push((i, j)),
            None => errors.at(
                attr,
                format!(
                    "settable property `{}` needs a setter: add `fn {wanted}(&mut self, value: T)` to this impl block",
                    m.exported_name()
                ),
            ),
        }
    }
    for &(_, j) in &pairs {
        let setter = &members[j];
        if setter.params.len() != 1 {
            errors.at(
                &setter.item.sig,
                format!(
                    "setter `{}` must take exactly one argument besides `self`, found {}",
                    setter.item.sig.ident,
                    setter.params.len()
                ),
            );
        }
        if setter.receiver.is_none() {
            errors.at(&setter.item.sig, "a setter takes `&mut self` (or `&self`) and the new value");
        }
    }
    pairs
}

fn check_members(item: &ItemImpl, members: &[Member], errors: &mut Errors) {
    let constructors: Vec<&Member> = members.iter().filter(|m| matches!(m.role, Role::Constructor)).collect();
    match constructors.as_slice() {
        [] => {
            errors.at(
                &item.self_ty,
                "a #[plugin_class] impl block needs a #[constructor]: `#[constructor] fn new(...) -> Self`. \
                 A class has one #[plugin_class] impl block: if this type has another, merge these methods into it",
            );
        }
        [_] => {}
        [_, rest @ ..] => {
            for m in rest {
                errors.at(&m.item.sig.ident, "a class has exactly one #[constructor]; this is a second one");
            }
        }
    }
    let destroys = members.iter().filter(|m| matches!(m.role, Role::Destroy)).count();
    let mut seen: Vec<(String, &'static str)> = Vec::new();
    for m in members {
        let sig = &m.item.sig;
        match &m.role {
            Role::Constructor => {
                if m.receiver.is_some() {
                    errors.at(sig, "a #[constructor] takes no `self`: it returns the new object");
                }
                if matches!(sig.output, ReturnType::Default) {
                    errors.at(&sig.ident, "a #[constructor] must return `Self` or `Result<Self, E>`");
                }
            }
            Role::Destroy => {
                if destroys > 1 {
                    errors.at(&sig.ident, "a class has at most one #[del] hook");
                }
                if m.receiver != Some(Receiver::Exclusive) || !m.params.is_empty() || sig.asyncness.is_some() {
                    errors.at(sig, "a #[del] hook is `fn name(&mut self)`: sync, no arguments");
                }
            }
            Role::Property { .. } => {
                if m.receiver != Some(Receiver::Shared) {
                    errors.at(sig, "a property getter takes `&self`");
                }
                if !m.params.is_empty() {
                    errors.at(&sig.inputs, "a property getter takes no arguments besides `&self`");
                }
            }
            Role::Method { .. } => {
                if m.receiver.is_none() {
                    errors.at(
                        &sig.ident,
                        format!(
                            "`{}` has no `self`: mark it #[constructor], or move it to an impl block without #[plugin_class]",
                            sig.ident
                        ),
                    );
                }
            }
        }
        let kind = match m.role {
            Role::Method { .. } => "method",
            Role::Property { .. } => "property",
            _ => continue,
        };
        let name = m.exported_name();
        if name.starts_with("__") && name.ends_with("__") {
            errors.at(&sig.ident, format!("`{name}` is a lifecycle name; use #[constructor] or #[del] instead"));
        }
        if let Some((_, prev)) = seen.iter().find(|(n, _)| *n == name) {
            let message = if *prev == kind {
                format!("the class already has a {kind} named `{name}`")
            } else {
                format!("`{name}` is both a {prev} and a {kind}; a class member name must be unique")
            };
            errors.at(&sig.ident, message);
        }
        seen.push((name, kind));
    }
}

/// `PluginClassMethods` for the block's type, spanned at the type so that a
/// struct without `#[plugin_class]` is reported once, there. Everything in
/// the body goes through helpers bounded by `PluginClassMethods` itself,
/// which this impl satisfies, so nothing else repeats that error.
fn methods_impl(item: &ItemImpl, body: TokenStream) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let self_ty = &item.self_ty;
    let trait_path = quote_spanned!(self_ty.span()=> #krate::PluginClassMethods);
    let generics = class_bounds(&item.generics);
    let (impl_generics, _, where_clause) = generics.split_for_impl();
    quote! {
        impl #impl_generics #trait_path for #self_ty #where_clause {
            fn class() -> #krate::Class {
                #body
            }
        }
    }
}

fn generate(item: &ItemImpl, members: &[Member], setters: &[(usize, usize)]) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let self_ty = &item.self_ty;
    let setter_indices: Vec<usize> = setters.iter().map(|&(_, j)| j).collect();
    let mut calls = Vec::new();
    let mut destroy = None;
    for (i, m) in members.iter().enumerate() {
        match &m.role {
            Role::Constructor => {
                let name = quote!(#krate::__private::class_name::<#self_ty>());
                let function = m.shim(self_ty, name).function();
                calls.push(quote!(.constructor(#function)));
            }
            Role::Destroy => {
                let ident = &m.item.sig.ident;
                destroy = Some(quote!(<#self_ty>::#ident));
            }
            Role::Property { .. } => {
                let name = m.exported_name();
                let getter = m.shim(self_ty, quote!(#name)).function();
                let setter = setters.iter().find(|&&(p, _)| p == i).map(|&(_, j)| {
                    let function = members[j].shim(self_ty, quote!(#name)).function();
                    quote!(.setter(#function))
                });
                let description = shim::description(&m.doc);
                calls.push(quote!(.property(#krate::Property::new(#name, #getter) #setter #description)));
            }
            Role::Method { .. } if setter_indices.contains(&i) => {}
            Role::Method { .. } => {
                let name = m.exported_name();
                let function = m.shim(self_ty, quote!(#name)).function();
                calls.push(quote!(.method(#function)));
            }
        }
    }
    let mut class = quote!(#krate::__private::class_of::<#self_ty>() #(#calls)*);
    if let Some(hook) = destroy {
        class = quote!(#krate::__private::on_destroy::<#self_ty>(#class, #hook));
    }
    let methods = methods_impl(item, class);
    // Owned parameters are right for exported methods, as for functions.
    quote! {
        #[allow(clippy::needless_pass_by_value)]
        #item
        #methods
    }
}

/// The block (without our attributes, and with no unused warnings) and,
/// where it cannot conflict, a `PluginClassMethods` that type-checks, so
/// registering the class adds no error to the ones that explain the mistake.
///
/// A block without a constructor may be a second block beside the class's
/// real one: an implementation would only add a conflict to its error (a
/// class with no other block is then reported where it is registered, by
/// `PluginClassMethods`'s own message).
fn stand_in(item: &ItemImpl, members: &[Member], error: Option<syn::Error>) -> TokenStream {
    let constructed = members.iter().any(|m| matches!(m.role, Role::Constructor));
    let methods = (item.trait_.is_some() || constructed)
        .then(|| methods_impl(item, quote!(::core::unreachable!("this class failed to compile"))));
    errors::with_errors(quote!(#[allow(dead_code)] #item #methods), error)
}
