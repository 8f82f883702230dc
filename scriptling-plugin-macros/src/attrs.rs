//! The attribute grammar: one parser for the options of every attribute,
//! driven by a table of each attribute's keys and their kinds.
//!
//! Every attribute reads the same way: `key = "text"` for strings,
//! `key = <expr>` for expressions, and `key` or `key = true` / `key = false`
//! for flags. A key given twice, a key the attribute does not have, and a
//! value of the wrong kind are errors at the offending tokens, the last one
//! listing the attribute's keys.

use proc_macro2::TokenStream;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Ident, Lit, LitStr, Meta, Token};

use crate::errors::Errors;

/// What an option's value is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `key = "text"`.
    Str,
    /// `key`, `key = true` or `key = false`.
    Flag,
    /// `key` alone, or `key = <expr>` (`default`: alone, `Default::default()`).
    FlagOrExpr,
}

/// The options one attribute accepts.
pub(crate) struct Spec {
    /// How the attribute is written in messages: `#[plugin_fn]`.
    pub(crate) attribute: &'static str,
    pub(crate) keys: &'static [(&'static str, Kind)],
}

/// A parsed option value.
enum Val {
    Str(LitStr),
    Flag(bool),
    Expr(Expr),
}

/// The options given to one attribute (or to several attributes of the
/// same kind on one item, which count as one).
#[derive(Default)]
pub(crate) struct Options {
    given: Vec<(Ident, Val)>,
}

impl Options {
    fn get(&self, key: &str) -> Option<&Val> {
        self.given.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string given for `key`.
    pub(crate) fn str(&self, key: &str) -> Option<LitStr> {
        match self.get(key) {
            Some(Val::Str(s)) => Some(s.clone()),
            _ => None,
        }
    }

    /// Whether the flag `key` is set.
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some(Val::Flag(true)))
    }

    /// The expression given for `key`.
    pub(crate) fn expr(&self, key: &str) -> Option<Expr> {
        match self.get(key) {
            Some(Val::Expr(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

impl Spec {
    /// Parses the tokens inside an attribute's parentheses.
    pub(crate) fn parse(&self, tokens: TokenStream, errors: &mut Errors) -> Options {
        let mut options = Options::default();
        self.parse_into(tokens, &mut options, errors);
        options
    }

    /// Parses one attribute (`#[arg(...)]`, `#[property]`) into `options`:
    /// a bare `#[name]` has no options; `#[name = ...]` is an error.
    pub(crate) fn parse_attr_into(&self, attr: &Attribute, options: &mut Options, errors: &mut Errors) {
        match &attr.meta {
            Meta::Path(_) => {}
            Meta::List(list) => self.parse_into(list.tokens.clone(), options, errors),
            Meta::NameValue(nv) => {
                errors.at(nv, format!("write the options in parentheses: `{}(...)`", self.attribute))
            }
        }
    }

    fn parse_into(&self, tokens: TokenStream, options: &mut Options, errors: &mut Errors) {
        let raw = match Punctuated::<RawOpt, Token![,]>::parse_terminated.parse2(tokens) {
            Ok(raw) => raw,
            Err(e) => return errors.push(e),
        };
        for RawOpt { key, value } in raw {
            let Some(&(_, kind)) = self.keys.iter().find(|(k, _)| key == k) else {
                errors.push(self.unknown(&key));
                continue;
            };
            if options.get(&key.to_string()).is_some() {
                errors.at(&key, format!("`{key}` is given twice"));
                continue;
            }
            match self.value(&key, kind, value) {
                Ok(val) => options.given.push((key, val)),
                Err(e) => errors.push(e),
            }
        }
    }

    fn value(&self, key: &Ident, kind: Kind, value: Option<Expr>) -> syn::Result<Val> {
        let bool_literal = |value: &Expr| match value {
            Expr::Lit(syn::ExprLit { lit: Lit::Bool(b), .. }) => Some(b.value),
            _ => None,
        };
        match (kind, value) {
            (Kind::Str, Some(Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }))) => Ok(Val::Str(s)),
            (Kind::Str, Some(other)) => {
                Err(syn::Error::new_spanned(other, format!("`{key}` takes a string: `{key} = \"...\"`")))
            }
            (Kind::Str, None) => Err(syn::Error::new_spanned(key, format!("`{key}` needs a value: `{key} = \"...\"`"))),
            (Kind::Flag | Kind::FlagOrExpr, None) => Ok(Val::Flag(true)),
            (Kind::Flag, Some(value)) => match bool_literal(&value) {
                Some(b) => Ok(Val::Flag(b)),
                None => {
                    Err(syn::Error::new_spanned(value, format!("`{key}` is a flag: write `{key}` or `{key} = true`")))
                }
            },
            (Kind::FlagOrExpr, Some(value)) => Ok(Val::Expr(value)),
        }
    }

    fn unknown(&self, key: &Ident) -> syn::Error {
        let message = if self.keys.is_empty() {
            format!("{} takes no options", self.attribute)
        } else {
            let list = crate::errors::quoted(self.keys.iter().map(|(k, _)| k), '`');
            format!("unknown {} option `{key}`; expected one of: {list}", self.attribute)
        };
        syn::Error::new_spanned(key, message)
    }
}

/// `key` or `key = value`, before its kind is known.
struct RawOpt {
    key: Ident,
    value: Option<Expr>,
}

impl Parse for RawOpt {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        use syn::ext::IdentExt;
        // Keywords too (`default`, `type`), so they can be option names.
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(RawOpt { key, value })
    }
}

// ---- the attributes ----------------------------------------------------------

/// `#[plugin_fn(...)]` on a free function.
pub(crate) const PLUGIN_FN: Spec =
    Spec { attribute: "#[plugin_fn]", keys: &[("name", Kind::Str), ("wrapper", Kind::Str), ("hidden", Kind::Flag)] };

/// `#[plugin_fn(...)]` on a method in a `#[plugin_class]` impl block.
pub(crate) const METHOD: Spec = Spec { attribute: "#[plugin_fn]", keys: &[("name", Kind::Str)] };

/// `#[plugin_class(...)]` on a struct.
pub(crate) const PLUGIN_CLASS: Spec =
    Spec { attribute: "#[plugin_class]", keys: &[("name", Kind::Str), ("wrapper", Kind::Str)] };

/// `#[plugin_class]` on an impl block.
pub(crate) const PLUGIN_CLASS_IMPL: Spec = Spec { attribute: "#[plugin_class] on an impl block", keys: &[] };

/// `#[property(...)]` on a getter.
pub(crate) const PROPERTY: Spec =
    Spec { attribute: "#[property]", keys: &[("name", Kind::Str), ("settable", Kind::Flag)] };

/// `#[constructor]`.
pub(crate) const CONSTRUCTOR: Spec = Spec { attribute: "#[constructor]", keys: &[] };

/// `#[del]`.
pub(crate) const DEL: Spec = Spec { attribute: "#[del]", keys: &[] };

/// `#[arg(...)]` on a parameter.
pub(crate) const ARG: Spec = Spec { attribute: "#[arg]", keys: &[("name", Kind::Str), ("default", Kind::FlagOrExpr)] };

/// `#[scriptling(...)]` on a type deriving `FromValue` / `IntoValue`.
pub(crate) const CONTAINER: Spec =
    Spec { attribute: "#[scriptling]", keys: &[("rename_all", Kind::Str), ("default", Kind::Flag)] };

/// `#[scriptling(...)]` on a field.
pub(crate) const FIELD: Spec = Spec {
    attribute: "#[scriptling] field",
    keys: &[("rename", Kind::Str), ("default", Kind::FlagOrExpr), ("skip", Kind::Flag)],
};

/// `#[scriptling(...)]` on an enum variant.
pub(crate) const VARIANT: Spec = Spec { attribute: "#[scriptling] variant", keys: &[("rename", Kind::Str)] };
