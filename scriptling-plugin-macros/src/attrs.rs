//! The attribute grammar: `key = value` options, each parsed into a typed
//! field; an unknown key lists the valid ones.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token};

/// One `key = value` (or bare `key`) inside an attribute's parentheses.
pub(crate) struct Opt {
    pub(crate) key: Ident,
    pub(crate) value: Option<Expr>,
}

impl Parse for Opt {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = input.call(Ident::parse_any_ident)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Opt { key, value })
    }
}

trait ParseAnyIdent {
    fn parse_any_ident(input: ParseStream<'_>) -> syn::Result<Ident>;
}

impl ParseAnyIdent for Ident {
    /// Accepts keywords too (`default`, `type`), so they can be option names.
    fn parse_any_ident(input: ParseStream<'_>) -> syn::Result<Ident> {
        use syn::ext::IdentExt;
        Ident::parse_any(input)
    }
}

/// All options of one attribute.
pub(crate) fn parse_opts(input: ParseStream<'_>) -> syn::Result<Vec<Opt>> {
    Ok(Punctuated::<Opt, Token![,]>::parse_terminated(input)?.into_iter().collect())
}

/// The error for an option this attribute does not have.
pub(crate) fn unknown(key: &Ident, attribute: &str, valid: &[&str]) -> syn::Error {
    let list = valid.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    syn::Error::new_spanned(key, format!("unknown {attribute} option `{key}`; expected one of: {list}"))
}

/// The string value of `key = "..."`.
pub(crate) fn string_value(opt: &Opt) -> syn::Result<LitStr> {
    match &opt.value {
        Some(Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. })) => Ok(s.clone()),
        Some(other) => Err(syn::Error::new_spanned(other, format!("`{}` takes a string literal", opt.key))),
        None => Err(syn::Error::new_spanned(&opt.key, format!("`{}` needs a value: `{} = \"...\"`", opt.key, opt.key))),
    }
}
