//! `#[plugin_fn]`: a descriptor type beside the function, implementing
//! `PluginFunction` with a call to the runtime's `Function` builder.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{FnArg, Item, ItemFn, LitStr, ReturnType};

use crate::attrs;
use crate::docs;
use crate::errors::{self, Errors};
use crate::params::{self, Param};
use crate::shim;

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(f)) => f,
        Ok(other) => {
            let err = syn::Error::new(
                crate::errors::item_span(&other),
                "#[plugin_fn] goes on a free function; for a struct and its methods use #[plugin_class]",
            );
            return errors::with_item(item, &err);
        }
        Err(e) => return errors::with_item(item, &e),
    };
    let mut func = parsed;
    let mut errors = Errors::default();
    let options = parse_options(attr, &mut errors);
    let params = check_signature(&mut func, &mut errors);
    match errors.finish() {
        Ok(()) => generate(&func, &params, &options),
        // The function without our `#[arg]` attributes, so it still compiles.
        Err(e) => errors::with_item(quote!(#func), &e),
    }
}

#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    wrapper: Option<LitStr>,
    hidden: bool,
}

fn parse_options(attr: TokenStream, errors: &mut Errors) -> Options {
    let mut options = Options::default();
    match attrs::parse_opts.parse2(attr) {
        Ok(opts) => {
            for opt in opts {
                if opt.key == "name" || opt.key == "wrapper" {
                    let slot = if opt.key == "name" { &mut options.name } else { &mut options.wrapper };
                    match attrs::string_value(&opt) {
                        Ok(s) if slot.is_some() => errors.at(s, format!("`{}` is given twice", opt.key)),
                        Ok(s) => *slot = Some(s),
                        Err(e) => errors.push(e),
                    }
                } else if opt.key == "hidden" && opt.value.is_none() {
                    options.hidden = true;
                } else {
                    errors.push(attrs::unknown(&opt.key, "#[plugin_fn]", &["name", "wrapper", "hidden"]));
                }
            }
        }
        Err(e) => errors.push(e),
    }
    options
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

fn generate(func: &ItemFn, params: &[Param], options: &Options) -> TokenStream {
    let ident = &func.sig.ident;
    let vis = &func.vis;
    let name = options.name.as_ref().map_or_else(|| params::unraw(ident), LitStr::value);
    let krate = quote!(::scriptling_plugin);
    let args = shim::args_ident();
    let (takes, bindings) = shim::take_args(params);
    let declare = shim::declare_params(params);
    let description = shim::description(&docs::doc_text(&func.attrs));
    let wrapper = options.wrapper.as_ref().map(|w| quote!(.source(#w)));
    let hidden = options.hidden.then(|| quote!(.hidden()));
    let ret_span = match &func.sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => ident.span(),
    };
    let call = quote!(#ident(#(#bindings),*));
    let body = if func.sig.asyncness.is_some() {
        let finish = shim::finish_call(quote!(#call.await), ret_span);
        quote_spanned!(ident.span()=>
            #krate::Function::new_async(#name, |#args: &mut #krate::Args| {
                #takes
                ::core::result::Result::Ok(async move { #finish })
            })
        )
    } else {
        let finish = shim::finish_call(call.clone(), ret_span);
        quote_spanned!(ident.span()=>
            #krate::Function::new(#name, |#args: &mut #krate::Args| {
                #takes
                #finish
            })
        )
    };
    quote! {
        #func

        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis enum #ident {}

        impl #krate::PluginFunction for #ident {
            fn function() -> #krate::Function {
                #body
                #declare
                #description
                #wrapper
                #hidden
            }
        }
    }
}
