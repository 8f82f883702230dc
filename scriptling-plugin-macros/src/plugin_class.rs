//! `#[plugin_class]`: on a struct, its identity (`PluginClass` and
//! `IntoValue`); on its impl block, its constructor, methods, properties and
//! destroy hook (`PluginClassMethods`). The two expansions never share state:
//! they meet through the traits.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, ImplItem, ImplItemFn, Item, ItemImpl, ItemStruct, LitStr, ReturnType, Type};

use crate::attrs;
use crate::docs;
use crate::errors::{self, Errors};
use crate::params::{self, Param};
use crate::shim;

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Struct(s)) => expand_struct(attr, s),
        Ok(Item::Impl(i)) => expand_impl(attr, i),
        Ok(Item::Fn(f)) => errors::with_item(
            item,
            &syn::Error::new(
                f.sig.fn_token.span,
                "#[plugin_class] goes on a struct and on its impl block; for a function use #[plugin_fn]",
            ),
        ),
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
    let mut name: Option<LitStr> = None;
    let mut wrapper: Option<LitStr> = None;
    match attrs::parse_opts.parse2(attr) {
        Ok(opts) => {
            for opt in opts {
                if opt.key == "name" || opt.key == "wrapper" {
                    match attrs::string_value(&opt) {
                        Ok(s) if opt.key == "name" => name = Some(s),
                        Ok(s) => wrapper = Some(s),
                        Err(e) => errors.push(e),
                    }
                } else {
                    errors.push(attrs::unknown(&opt.key, "#[plugin_class]", &["name", "wrapper"]));
                }
            }
        }
        Err(e) => errors.push(e),
    }
    if !item.generics.params.is_empty() {
        errors.at(
            &item.generics,
            "plugin classes cannot be generic: Scriptling constructs one concrete class; \
             wrap a concrete instantiation in a struct of its own",
        );
    }
    if let Err(e) = errors.finish() {
        return errors::with_item(quote!(#item), &e);
    }
    let ident = &item.ident;
    let name = name.map_or_else(|| params::unraw(ident), |s| s.value());
    let doc = docs::doc_text(&item.attrs);
    let krate = quote!(::scriptling_plugin);
    // Spanned at the struct's name, so a non-Send/Sync field is reported there.
    let source =
        wrapper.map(|w| quote!(const SOURCE: ::core::option::Option<&'static str> = ::core::option::Option::Some(#w);));
    let identity = quote_spanned! {ident.span()=>
        impl #krate::PluginClass for #ident {
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #doc;
            #source
        }
    };
    quote! {
        #item

        #identity

        impl #krate::IntoValue for #ident {
            fn into_value(self) -> ::core::result::Result<#krate::Value, #krate::IntoValueError> {
                #krate::into_remote(self)
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Receiver {
    None,
    Shared,
    Exclusive,
}

struct Member {
    item: ImplItemFn,
    role: Role,
    receiver: Receiver,
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
}

fn expand_impl(attr: TokenStream, mut item: ItemImpl) -> TokenStream {
    let mut errors = Errors::default();
    if !attr.is_empty() {
        errors.at(&attr, "#[plugin_class] on an impl block takes no options; put `name = \"...\"` on the struct");
    }
    if let Some((_, path, _)) = &item.trait_ {
        errors.at(path, "#[plugin_class] goes on the class's inherent impl block (`impl Counter`), not a trait impl");
    }
    if !item.generics.params.is_empty() {
        errors.at(&item.generics, "plugin classes cannot be generic");
    }
    let mut members = Vec::new();
    for impl_item in &mut item.items {
        if let ImplItem::Fn(f) = impl_item {
            if let Some(member) = analyze_member(f, &mut errors) {
                members.push(member);
            }
        }
    }
    let setters = pair_setters(&mut members, &mut errors);
    check_members(&item, &members, &mut errors);
    match errors.finish() {
        Ok(()) => generate(&item, &members, &setters),
        Err(e) => errors::with_item(quote!(#item), &e),
    }
}

/// Reads a function's role attributes (removing them), receiver and
/// parameters.
fn analyze_member(f: &mut ImplItemFn, errors: &mut Errors) -> Option<Member> {
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
            if r.mutability.is_some() { Receiver::Exclusive } else { Receiver::Shared }
        }
        _ => Receiver::None,
    };
    let params = params::analyze(&mut sig.inputs, errors);
    let doc = docs::doc_text(&f.attrs);
    let role = role.unwrap_or(Role::Method { name: None });
    Some(Member { item: f.clone(), role, receiver, params, doc })
}

fn take_role(attrs: &mut Vec<Attribute>, errors: &mut Errors) -> Option<Role> {
    let mut role: Option<Role> = None;
    let mut set = |new: Role, span: &Attribute, errors: &mut Errors| {
        if role.is_some() {
            errors.at(span, "a function can have only one of #[constructor], #[property], #[del] and #[plugin_fn]");
        } else {
            role = Some(new);
        }
    };
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        let path = attr.path();
        if path.is_ident("constructor") || path.is_ident("del") {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.at(
                    &attr,
                    format!("#[{}] takes no options", path.get_ident().map(ToString::to_string).unwrap_or_default()),
                );
            }
            let new = if path.is_ident("constructor") { Role::Constructor } else { Role::Destroy };
            set(new, &attr, errors);
        } else if path.is_ident("property") {
            let mut name = None;
            let mut settable = false;
            for opt in options_of(&attr, errors) {
                if opt.key == "settable" && opt.value.is_none() {
                    settable = true;
                } else if opt.key == "name" {
                    match attrs::string_value(&opt) {
                        Ok(s) => name = Some(s),
                        Err(e) => errors.push(e),
                    }
                } else {
                    errors.push(attrs::unknown(&opt.key, "#[property]", &["name", "settable"]));
                }
            }
            set(Role::Property { name, settable, attr: quote!(#attr) }, &attr, errors);
        } else if path.is_ident("plugin_fn") {
            let mut name = None;
            for opt in options_of(&attr, errors) {
                if opt.key == "name" {
                    match attrs::string_value(&opt) {
                        Ok(s) => name = Some(s),
                        Err(e) => errors.push(e),
                    }
                } else {
                    errors.push(attrs::unknown(&opt.key, "#[plugin_fn]", &["name"]));
                }
            }
            set(Role::Method { name }, &attr, errors);
        } else {
            kept.push(attr);
        }
    }
    *attrs = kept;
    role
}

fn options_of(attr: &Attribute, errors: &mut Errors) -> Vec<attrs::Opt> {
    match &attr.meta {
        syn::Meta::Path(_) => Vec::new(),
        syn::Meta::List(list) => match attrs::parse_opts.parse2(list.tokens.clone()) {
            Ok(opts) => opts,
            Err(e) => {
                errors.push(e);
                Vec::new()
            }
        },
        syn::Meta::NameValue(nv) => {
            errors.at(nv, "expected options in parentheses");
            Vec::new()
        }
    }
}

/// Finds the `set_<name>` setter of each settable property; the setters are
/// not exported as methods. Returns (property index, setter index) pairs.
fn pair_setters(members: &mut [Member], errors: &mut Errors) -> Vec<(usize, usize)> {
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
        if setter.receiver == Receiver::None {
            errors.at(&setter.item.sig, "a setter takes `&mut self` (or `&self`) and the new value");
        }
    }
    pairs
}

fn check_members(item: &ItemImpl, members: &[Member], errors: &mut Errors) {
    let constructors: Vec<&Member> = members.iter().filter(|m| matches!(m.role, Role::Constructor)).collect();
    match constructors.as_slice() {
        [] => errors.at(
            &item.self_ty,
            "a #[plugin_class] impl block needs a #[constructor]: `#[constructor] fn new(...) -> Self`",
        ),
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
                if m.receiver != Receiver::None {
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
                if m.receiver != Receiver::Exclusive || !m.params.is_empty() || sig.asyncness.is_some() {
                    errors.at(sig, "a #[del] hook is `fn name(&mut self)`: sync, no arguments");
                }
            }
            Role::Property { .. } => {
                if m.receiver != Receiver::Shared {
                    errors.at(sig, "a property getter takes `&self`");
                }
                if !m.params.is_empty() {
                    errors.at(&sig.inputs, "a property getter takes no arguments besides `&self`");
                }
            }
            Role::Method { .. } => {
                if m.receiver == Receiver::None {
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

fn generate(item: &ItemImpl, members: &[Member], setters: &[(usize, usize)]) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let self_ty = &item.self_ty;
    let setter_indices: Vec<usize> = setters.iter().map(|&(_, j)| j).collect();
    let mut calls = Vec::new();
    for (i, m) in members.iter().enumerate() {
        match &m.role {
            Role::Constructor => {
                let function = constructor_shim(self_ty, m);
                calls.push(quote!(.constructor(#function)));
            }
            Role::Destroy => {
                let ident = &m.item.sig.ident;
                calls.push(quote!(.on_destroy::<#self_ty>(<#self_ty>::#ident)));
            }
            Role::Property { .. } => {
                let name = m.exported_name();
                let getter = method_shim(self_ty, m, &name);
                let setter = setters.iter().find(|&&(p, _)| p == i).map(|&(_, j)| {
                    let function = method_shim(self_ty, &members[j], &name);
                    quote!(.setter(#function))
                });
                let description = shim::description(&m.doc);
                calls.push(quote!(.property(#krate::Property::new(#name, #getter) #setter #description)));
            }
            Role::Method { .. } if setter_indices.contains(&i) => {}
            Role::Method { .. } => {
                let function = method_shim(self_ty, m, &m.exported_name());
                calls.push(quote!(.method(#function)));
            }
        }
    }
    quote! {
        #item

        impl #krate::PluginClassMethods for #self_ty {
            fn class() -> #krate::Class {
                #krate::Class::new::<#self_ty>()
                    #(#calls)*
            }
        }
    }
}

fn ret_span(m: &Member) -> Span {
    match &m.item.sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => m.item.sig.ident.span(),
    }
}

fn constructor_shim(self_ty: &Type, m: &Member) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let args = shim::args_ident();
    let ident = &m.item.sig.ident;
    let (takes, bindings) = shim::take_args(&m.params);
    let declare = shim::declare_params(&m.params);
    let description = shim::description(&m.doc);
    let call = quote!(<#self_ty>::#ident(#(#bindings),*));
    let span = ret_span(m);
    let body = if m.item.sig.asyncness.is_some() {
        let finish = quote_spanned!(span=>
            <_ as #krate::__private::ConstructorReturn<#self_ty>>::into_constructed(#call.await));
        quote_spanned!(ident.span()=>
            #krate::Function::new_async(<#self_ty as #krate::PluginClass>::NAME, |#args: &mut #krate::Args| {
                #takes
                ::core::result::Result::Ok(async move { #finish })
            })
        )
    } else {
        let finish = quote_spanned!(span=>
            <_ as #krate::__private::ConstructorReturn<#self_ty>>::into_constructed(#call));
        quote_spanned!(ident.span()=>
            #krate::Function::new(<#self_ty as #krate::PluginClass>::NAME, |#args: &mut #krate::Args| {
                #takes
                #finish
            })
        )
    };
    quote!(#body #declare #description)
}

/// A method, property getter or setter: take the receiver, convert the
/// arguments, lock the object (shared or exclusive) and call.
fn method_shim(self_ty: &Type, m: &Member, name: &str) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let args = shim::args_ident();
    let ident = &m.item.sig.ident;
    let (takes, bindings) = shim::take_args(&m.params);
    let declare = shim::declare_params(&m.params);
    let description = shim::description(&m.doc);
    let exclusive = m.receiver == Receiver::Exclusive;
    let is_async = m.item.sig.asyncness.is_some();
    let lock = match (exclusive, is_async) {
        (true, false) => quote!(let mut __scriptling_guard = __scriptling_this.write()?;),
        (false, false) => quote!(let __scriptling_guard = __scriptling_this.read()?;),
        (true, true) => quote!(let mut __scriptling_guard = __scriptling_this.write_async().await?;),
        (false, true) => quote!(let __scriptling_guard = __scriptling_this.read_async().await?;),
    };
    let borrow = if exclusive { quote!(&mut *__scriptling_guard) } else { quote!(&*__scriptling_guard) };
    let call = quote!(<#self_ty>::#ident(#borrow #(, #bindings)*));
    let span = ret_span(m);
    let receiver = quote!(let __scriptling_this = #args.receiver::<#self_ty>()?;);
    let body = if is_async {
        let finish = shim::finish_call(quote!(#call.await), span);
        quote_spanned!(ident.span()=>
            #krate::Function::new_async(#name, |#args: &mut #krate::Args| {
                #receiver
                #takes
                ::core::result::Result::Ok(async move {
                    #lock
                    #finish
                })
            })
        )
    } else {
        let finish = shim::finish_call(call.clone(), span);
        quote_spanned!(ident.span()=>
            #krate::Function::new(#name, |#args: &mut #krate::Args| {
                #receiver
                #takes
                #lock
                #finish
            })
        )
    };
    quote!(#body #declare #description)
}
