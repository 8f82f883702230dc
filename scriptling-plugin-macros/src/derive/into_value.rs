//! `#[derive(IntoValue)]`: writes the value forms in `mod.rs`; skipped
//! fields are left out.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use syn::spanned::Spanned;

use super::{Body, Model, Shape, Trait, impl_header};

/// The generated `impl IntoValue`.
pub(super) fn generate(model: &Model) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let header = impl_header(model, Trait::IntoValue);
    let body = match &model.body {
        Body::Struct(shape) => {
            let (pattern, write) = write_shape(shape, &quote!(Self));
            quote!({
                let #pattern = self;
                #write
            })
        }
        Body::Enum(variants) => {
            let arms = variants.iter().map(|v| {
                let ident = &v.ident;
                let key = &v.key;
                let (pattern, write) = write_shape(&v.shape, &quote!(Self::#ident));
                match v.shape {
                    Shape::Unit => quote!(#pattern => ::core::result::Result::Ok(#krate::Value::String(#key.into())),),
                    _ => quote!(#pattern => ::core::result::Result::Ok(#krate::__private::tagged(#key, #write?)),),
                }
            });
            quote!(match self { #(#arms)* })
        }
    };
    // Help text shows a struct's default with its keys in field order.
    let key_order = match &model.body {
        Body::Struct(Shape::Named(fields)) => {
            let keys = fields.iter().filter(|f| !f.skipped()).map(|f| &f.key);
            Some(quote!(fn key_order() -> &'static [&'static str] { &[#(#keys),*] }))
        }
        _ => None,
    };
    quote! {
        #header {
            fn into_value(self) -> ::core::result::Result<#krate::Value, #krate::IntoValueError> {
                #body
            }
            #key_order
        }
    }
}

/// The pattern that takes `target` (`Self`, `Self::Variant`) apart, and the
/// block (a `Result<Value, IntoValueError>`, returning early on a field that
/// fails) that writes its fields.
fn write_shape(shape: &Shape, target: &TokenStream) -> (TokenStream, TokenStream) {
    let krate = quote!(::scriptling_plugin);
    let private = quote!(#krate::__private);
    match shape {
        Shape::Named(fields) => {
            let bindings = fields.iter().map(|f| {
                let ident = &f.ident;
                if f.skipped() { quote!(#ident: _) } else { quote!(#ident) }
            });
            let puts = fields.iter().filter(|f| !f.skipped()).map(|f| {
                let (key, ident, ty) = (&f.key, &f.ident, &f.ty);
                quote_spanned!(ty.span()=> #private::put(&mut __scriptling_entries, #key, #ident, <#ty as #krate::IntoValue>::into_value)?;)
            });
            let write = quote!({
                let mut __scriptling_entries = #private::Entries::new();
                #(#puts)*
                ::core::result::Result::<#krate::Value, #krate::IntoValueError>::Ok(
                    #krate::Value::Dict(__scriptling_entries),
                )
            });
            (quote!(#target { #(#bindings),* }), write)
        }
        Shape::Tuple(types) if types.len() == 1 => {
            let write = quote_spanned!(types[0].span()=> #krate::IntoValue::into_value(__scriptling_0));
            (quote!(#target(__scriptling_0)), write)
        }
        Shape::Tuple(types) => {
            let names: Vec<_> = (0..types.len()).map(|i| format_ident!("__scriptling_{}", i)).collect();
            let items = types
                .iter()
                .zip(&names)
                .enumerate()
                .map(|(i, (ty, name))| quote_spanned!(ty.span()=> #private::element(#i, #name, <#ty as #krate::IntoValue>::into_value)?));
            let write = quote!({
                ::core::result::Result::<#krate::Value, #krate::IntoValueError>::Ok(
                    #krate::Value::List(::std::vec![#(#items),*]),
                )
            });
            (quote!(#target(#(#names),*)), write)
        }
        Shape::Unit => (quote!(#target), quote!(::core::result::Result::Ok(#krate::Value::Null))),
    }
}
