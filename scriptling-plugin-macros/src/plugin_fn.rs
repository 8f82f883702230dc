//! `#[plugin_fn]`: a descriptor type beside the function, implementing
//! `PluginFunction` with a call to the runtime's `Function` builder.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{FnArg, Item, ItemFn};

use crate::attrs::{self, Options};
use crate::docs;
use crate::errors::{self, Errors};
use crate::params::{self, Param};
use crate::shim::Shim;

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(f)) => f,
        Ok(other) => {
            let err = syn::Error::new(
                errors::item_span(&other),
                "#[plugin_fn] goes on a free function; for a struct and its methods use #[plugin_class]",
            );
            return match other {
                // The struct was meant as a class: give it its identity, so
                // its impl block and registration add no errors of their own.
                Item::Struct(s) => crate::plugin_class::with_identity(s, &attrs::Options::default(), Some(err)),
                _ => errors::with_item(item, &err),
            };
        }
        Err(e) => return errors::with_item(item, &e),
    };
    let mut errors = Errors::default();
    let options = attrs::PLUGIN_FN.parse(attr, &mut errors);
    let params = check_signature(&mut func, &mut errors);
    match errors.finish() {
        Ok(()) => generate(&func, &params, &options),
        Err(e) => stand_in(&func, e),
    }
}

fn check_signature(func: &mut ItemFn, errors: &mut Errors) -> Vec<Param> {
    let sig = &mut func.sig;
    if !sig.generics.params.is_empty() {
        errors.at(
            &sig.generics,
            "#[plugin_fn] functions cannot be generic: Scriptling calls one concrete function; \
             export a wrapper with concrete types",
        );
    }
    if let Some(w) = &sig.generics.where_clause {
        errors.at(w, "#[plugin_fn] functions cannot have a where clause");
    }
    if let Some(u) = &sig.unsafety {
        errors.at(u, "#[plugin_fn] functions cannot be unsafe");
    }
    if let Some(v) = &sig.variadic {
        errors.at(v, "#[plugin_fn] functions cannot be variadic");
    }
    for input in &sig.inputs {
        if let FnArg::Receiver(r) = input {
            errors.at(r, "#[plugin_fn] goes on free functions; put methods in a #[plugin_class] impl block");
        }
    }
    params::analyze(&mut sig.inputs, errors)
}

/// The descriptor type, named like the function (types and values live in
/// different namespaces), so `.function::<greet>()` names both.
fn descriptor(func: &ItemFn, body: TokenStream) -> TokenStream {
    let ident = &func.sig.ident;
    let vis = &func.vis;
    let krate = quote!(::scriptling_plugin);
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis enum #ident {}

        impl #krate::PluginFunction for #ident {
            fn function() -> #krate::Function {
                #body
            }
        }
    }
}

fn generate(func: &ItemFn, params: &[Param], options: &Options) -> TokenStream {
    let ident = &func.sig.ident;
    let name = options.str("name").map_or_else(|| params::unraw(ident), |s| s.value());
    let doc = docs::doc_text(&func.attrs);
    let shim = Shim::new(&func.sig, quote!(#name), quote!(#ident), params, &doc);
    let function = shim.function();
    let wrapper = options.str("wrapper").map(|w| quote!(.source(#w)));
    let hidden = options.flag("hidden").then(|| quote!(.hidden()));
    let descriptor =
        descriptor(func, quote!(let __scriptling_function = #function; __scriptling_function #wrapper #hidden));
    // Owned parameters are right here: each argument is converted into a
    // fresh value the function owns, so a borrow would only add a copy.
    quote! {
        #[allow(clippy::needless_pass_by_value)]
        #func
        #descriptor
    }
}

/// A function under another attribute (`#[plugin_class]`) that was meant
/// as a `#[plugin_fn]`: [`stand_in`], its `#[arg]` attributes taken off
/// (their mistakes are not the one to report).
pub(crate) fn misplaced(mut func: ItemFn, error: syn::Error) -> TokenStream {
    params::analyze(&mut func.sig.inputs, &mut Errors::default());
    stand_in(&func, error)
}

/// The function (without our attributes, and with no unused warning) and a
/// descriptor that type-checks, so registering the function adds no error
/// to the ones that explain the mistake.
fn stand_in(func: &ItemFn, error: syn::Error) -> TokenStream {
    let body = quote!(::core::unreachable!("this function failed to compile"));
    // A method (in some impl block) cannot have a type beside it.
    let method = func.sig.inputs.iter().any(|i| matches!(i, FnArg::Receiver(_)));
    let descriptor = (!method).then(|| descriptor(func, body));
    errors::with_errors(quote!(#[allow(dead_code)] #func #descriptor), Some(error))
}
