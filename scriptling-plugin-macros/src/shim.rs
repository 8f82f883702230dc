//! The code shared by every generated call shim: taking each argument from
//! `Args` (with errors spanned at the parameter's type) and declaring the
//! parameters on the `Function` builder.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::params::{self, Param};

/// The name of the `&mut Args` closure parameter in generated code.
pub(crate) fn args_ident() -> Ident {
    format_ident!("__scriptling_args")
}

/// `let __scriptling_argN: T = args.take(N)?;` for each parameter, and the
/// binding names in order.
pub(crate) fn take_args(params: &[Param]) -> (TokenStream, Vec<Ident>) {
    let args = args_ident();
    let bindings: Vec<Ident> = (0..params.len()).map(|i| format_ident!("__scriptling_arg{}", i)).collect();
    let takes = params.iter().zip(&bindings).enumerate().map(|(i, (p, binding))| {
        let ty = &p.ty;
        let take = match &p.default {
            None => quote_spanned!(ty.span()=> #args.take::<#ty>(#i)?),
            Some(default) => {
                let value = params::default_value(default);
                quote_spanned!(ty.span()=> #args.take_or_else::<#ty>(#i, || #value)?)
            }
        };
        quote!(let #binding: #ty = #take;)
    });
    (quote!(#(#takes)*), bindings)
}

/// `.param("name")` / `.optional_param("name", "shown default")` calls.
pub(crate) fn declare_params(params: &[Param]) -> TokenStream {
    let declare = params.iter().map(|p| {
        let name = &p.name;
        match &p.default {
            None => quote!(.param(#name)),
            Some(default) => {
                let shown = params::shown_default(default);
                quote!(.optional_param(#name, #shown))
            }
        }
    });
    quote!(#(#declare)*)
}

/// `.description("...")` when there is help text.
pub(crate) fn description(doc: &str) -> TokenStream {
    if doc.is_empty() { quote!() } else { quote!(.description(#doc)) }
}

/// Converts the user function's return value, with the conversion spanned
/// at the return type so a type without `IntoValue` is reported there.
pub(crate) fn finish_call(call: TokenStream, ret_span: proc_macro2::Span) -> TokenStream {
    let ret = Ident::new("__scriptling_ret", ret_span);
    let convert = quote_spanned!(ret_span=> ::scriptling_plugin::__private::IntoCallResult::into_call_result(#ret));
    quote!({
        let #ret = #call;
        #convert
    })
}
