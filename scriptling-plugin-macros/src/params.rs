//! Parameters of an exported callable: names, types, defaults, and the
//! checks that make misuse a compile error at the offending tokens.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::punctuated::Punctuated;
use syn::{Expr, FnArg, Ident, Pat, Token, Type};

use crate::attrs::{self, Options};
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
        let options = take_arg_attrs(&mut typed.attrs, errors);
        let given = options.str("name").map(|s| s.value());
        let name = match (&*typed.pat, given) {
            (_, Some(name)) => name,
            (Pat::Ident(p), None) if p.by_ref.is_none() && p.subpat.is_none() => unraw(&p.ident),
            (other, None) => {
                errors.at(
                    other,
                    "this parameter needs a name for its keyword: add `#[arg(name = \"...\")]` \
                     (a plain name like `options` is its own keyword)",
                );
                continue;
            }
        };
        check_type(&typed.ty, errors);
        params.push(Param { name, ty: (*typed.ty).clone(), default: param_default(&options) });
    }
    params
}

/// The identifier as Scriptling sees it (`r#type` is `type`).
pub(crate) fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map_or_else(|| s.clone(), str::to_owned)
}

fn take_arg_attrs(attrs: &mut Vec<syn::Attribute>, errors: &mut Errors) -> Options {
    let mut options = Options::default();
    attrs.retain(|attr| {
        if !attr.path().is_ident("arg") {
            return true;
        }
        attrs::ARG.parse_attr_into(attr, &mut options, errors);
        false
    });
    options
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
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(_), .. }) => quote!(::core::convert::Into::into(#expr)),
        other => other.to_token_stream(),
    }
}

/// How the default of `param` reads in help text, as an expression that
/// works it out when the plugin is built: the value written as a
/// Scriptling literal (`3`, `-1`, `[1, 2]`, `{"limit": 10}`) when its type
/// converts to a value, otherwise the Rust expression as written.
/// `make` is the closure that makes the default (see `shim::default_makers`).
pub(crate) fn shown_default(param: &Param, default: &Expr, make: &Ident) -> TokenStream {
    let krate = quote!(::scriptling_plugin);
    let ty = &param.ty;
    let fallback = rust_text(default.to_token_stream());
    quote!({
        #[allow(unused_imports)]
        use #krate::__private::{ShowDefault as _, ShowRust as _};
        let __scriptling_default: #ty = #make();
        (&&#krate::__private::Shown::new(__scriptling_default)).shown(#fallback)
    })
}

/// Tokens as a person writes them: `FindOptions::default()`, not
/// `FindOptions :: default ()`.
pub(crate) fn rust_text(tokens: TokenStream) -> String {
    let mut out = String::new();
    // The last token was a word (identifier, literal or group), which a
    // next word must be separated from and after which an operator is binary.
    let mut after_word = false;
    // The last token was punctuation joined to this one (`::`, `==`).
    let mut joined = false;
    // The punctuation being written is a spaced (binary) operator.
    let mut operator = false;
    for token in tokens {
        match token {
            TokenTree::Ident(_) | TokenTree::Literal(_) => {
                if after_word {
                    out.push(' ');
                }
                out.push_str(&token.to_string());
                after_word = true;
                joined = false;
            }
            TokenTree::Punct(p) => {
                let c = p.as_char();
                let alone = p.spacing() == Spacing::Alone;
                if joined {
                    out.push(c);
                    if operator && alone {
                        out.push(' ');
                    }
                } else if c == ',' || c == ';' || (c == ':' && alone) {
                    out.push(c);
                    out.push(' ');
                } else if after_word && matches!(c, '+' | '-' | '*' | '/' | '%' | '=') {
                    out.push(' ');
                    out.push(c);
                    operator = true;
                    if alone {
                        out.push(' ');
                    }
                } else {
                    out.push(c);
                    operator = false;
                }
                joined = !alone;
                after_word = false;
            }
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                if after_word && g.delimiter() == Delimiter::Brace {
                    out.push(' ');
                }
                out.push_str(open);
                out.push_str(rust_text(g.stream()).trim_end());
                out.push_str(close);
                after_word = true;
                joined = false;
            }
        }
    }
    out
}

/// `#[arg(default = <expr>)]`, or `#[arg(default)]`: `Default::default()`.
fn param_default(options: &Options) -> Option<syn::Expr> {
    options
        .expr("default")
        .or_else(|| options.flag("default").then(|| syn::parse_quote!(::core::default::Default::default())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(expr: &str) -> String {
        rust_text(expr.parse().unwrap())
    }

    #[test]
    fn rust_text_reads_as_written() {
        assert_eq!(text("FindOptions :: default ()"), "FindOptions::default()");
        assert_eq!(text("Json(FindOptions::default())"), "Json(FindOptions::default())");
        assert_eq!(text("vec![1, 2]"), "vec![1, 2]");
        assert_eq!(text("- 1"), "-1");
        assert_eq!(text("a + b * 2"), "a + b * 2");
        assert_eq!(text("Point { x: 1, y: 2 }"), "Point { x: 1, y: 2 }");
        assert_eq!(text("Vec::<u8>::new()"), "Vec::<u8>::new()");
        assert_eq!(text("x as u8"), "x as u8");
        assert_eq!(text("a == b"), "a == b");
    }
}
