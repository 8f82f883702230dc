//! `#[derive(FromValue)]`: reads the value forms in `mod.rs`, each error
//! carrying the key or index where it happened.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use syn::spanned::Spanned;

use super::{Body, Fallback, Model, Read, Shape, Trait, impl_header, quoted_list};

/// The generated `impl FromValue`.
pub(super) fn generate(model: &Model) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let header = impl_header(model, Trait::FromValue);
    let expected = expected(model);
    let body = match &model.body {
        Body::Struct(shape) => read_shape(shape, &quote!(Self), quote!(__scriptling_value), &expected),
        Body::Enum(variants) => read_enum(variants, &expected),
    };
    quote! {
        #header {
            fn from_value(
                __scriptling_value: #krate::Value,
            ) -> ::core::result::Result<Self, #krate::FromValueError> {
                #body
            }

            fn expected() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#expected)
            }
        }
    }
}

/// What the type accepts, for mismatch errors: `a dict`, `one of 'red', 'green'`.
fn expected(model: &Model) -> String {
    match &model.body {
        Body::Struct(Shape::Named(_)) => "a dict".to_owned(),
        Body::Struct(Shape::Tuple(fields)) if fields.len() == 1 => "a value".to_owned(),
        Body::Struct(Shape::Tuple(fields)) => format!("a list of {} items", fields.len()),
        Body::Struct(Shape::Unit) => "None".to_owned(),
        Body::Enum(variants) => {
            let (unit, data): (Vec<_>, Vec<_>) = variants.iter().partition(|v| matches!(v.shape, Shape::Unit));
            let unit: Vec<&str> = unit.iter().map(|v| v.key.as_str()).collect();
            let data: Vec<&str> = data.iter().map(|v| v.key.as_str()).collect();
            match (unit.is_empty(), data.is_empty()) {
                (_, true) => format!("one of {}", quoted_list(&unit)),
                (true, false) => format!("a dict naming one of {}", quoted_list(&data)),
                (false, false) => {
                    format!("one of {}, or a dict naming one of {}", quoted_list(&unit), quoted_list(&data))
                }
            }
        }
    }
}

/// Builds `target` (`Self`, or `Self::Variant`) of `shape` from `value`.
fn read_shape(shape: &Shape, target: &TokenStream, value: TokenStream, expected: &str) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let private = quote!(#krate::__private);
    match shape {
        Shape::Named(fields) => {
            let known: Vec<&str> = fields.iter().filter(|f| !f.skipped()).map(|f| f.key.as_str()).collect();
            let inits = fields.iter().map(|f| {
                let (ident, ty, key) = (&f.ident, &f.ty, &f.key);
                let fallback = |d: &Fallback| match d {
                    Fallback::Default => quote!(::core::default::Default::default()),
                    Fallback::Expr(e) => quote!(#e),
                    Fallback::Container => quote!(__scriptling_default.#ident),
                };
                let read = match &f.read {
                    Read::Skipped(d) => fallback(d),
                    // No closure: moving the field out of the default is
                    // fine in a match arm in every edition.
                    Read::Defaulted(Fallback::Container) => quote_spanned!(ty.span()=>
                        match #private::field_opt(&mut __scriptling_entries, #key, <#ty as #krate::FromValue>::from_value)? {
                            ::core::option::Option::Some(__scriptling_field) => __scriptling_field,
                            ::core::option::Option::None => __scriptling_default.#ident,
                        }),
                    Read::Required => quote_spanned!(ty.span()=>
                        #private::field(&mut __scriptling_entries, #key, <#ty as #krate::FromValue>::from_value)?),
                    Read::Defaulted(d) => {
                        let fallback = fallback(d);
                        quote_spanned!(ty.span()=>
                            #private::field_or_else(&mut __scriptling_entries, #key, <#ty as #krate::FromValue>::from_value, || #fallback)?)
                    }
                };
                quote!(#ident: #read)
            });
            let container_default = fields
                .iter()
                .any(|f| matches!(f.read, Read::Defaulted(Fallback::Container) | Read::Skipped(Fallback::Container)));
            let default = container_default
                .then(|| quote!(let __scriptling_default: Self = ::core::default::Default::default();));
            quote!({
                #default
                let mut __scriptling_entries = #private::dict(#value, #expected)?;
                #private::no_other_keys(&__scriptling_entries, &[#(#known),*])?;
                ::core::result::Result::Ok(#target { #(#inits),* })
            })
        }
        Shape::Tuple(types) if types.len() == 1 => {
            let ty = &types[0];
            quote_spanned!(ty.span()=>
                ::core::result::Result::Ok(#target(<#ty as #krate::FromValue>::from_value(#value)?)))
        }
        Shape::Tuple(types) => {
            let len = types.len();
            let items = types
                .iter()
                .enumerate()
                .map(|(i, ty)| quote_spanned!(ty.span()=> #private::item(&mut __scriptling_items, #i, <#ty as #krate::FromValue>::from_value)?));
            quote!({
                let mut __scriptling_items = #private::list(#value, #len, #expected)?;
                ::core::result::Result::Ok(#target(#(#items),*))
            })
        }
        Shape::Unit => quote!(match #value {
            #krate::Value::Null => ::core::result::Result::Ok(#target),
            other => ::core::result::Result::Err(#krate::FromValueError::mismatch(#expected, &other)),
        }),
    }
}

/// A variant by name: a string for one without data, a one-entry dict for
/// one with data (whose errors are placed under its name).
fn read_enum(variants: &[super::Variant], expected: &str) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let private = quote!(#krate::__private);
    let known: Vec<&str> = variants.iter().map(|v| v.key.as_str()).collect();
    let arms = variants.iter().map(|v| {
        let ident = &v.ident;
        let key = &v.key;
        let target = quote!(Self::#ident);
        match &v.shape {
            Shape::Unit => quote! {
                (#key, ::core::option::Option::None) => ::core::result::Result::Ok(#target),
                (#key, ::core::option::Option::Some(_)) => ::core::result::Result::Err(#private::variant_form(#key, false)),
            },
            shape => {
                let inner_expected = format!("the data of variant '{key}'");
                let read = read_shape(shape, &target, quote!(__scriptling_data), &inner_expected);
                quote! {
                    (#key, ::core::option::Option::Some(__scriptling_data)) => {
                        let __scriptling_read = || -> ::core::result::Result<Self, #krate::FromValueError> { #read };
                        __scriptling_read().map_err(|e| e.at_key(#key))
                    }
                    (#key, ::core::option::Option::None) => ::core::result::Result::Err(#private::variant_form(#key, true)),
                }
            }
        }
    });
    quote!({
        let (__scriptling_name, __scriptling_data) = #private::variant(__scriptling_value, #expected)?;
        match (__scriptling_name.as_str(), __scriptling_data) {
            #(#arms)*
            (other, _) => ::core::result::Result::Err(#private::unknown_variant(other, &[#(#known),*])),
        }
    })
}
