//! Collecting every error of an expansion, each at its own span.

use proc_macro2::TokenStream;

/// Accumulates errors so that all problems are reported at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn at(&mut self, tokens: impl quote::ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// `Err` with every error so far, if any.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// The item as written plus the errors: re-emitting the item keeps one
/// mistake from cascading into "cannot find function" errors elsewhere.
pub(crate) fn with_item(item: TokenStream, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    quote::quote!(#item #errors)
}

/// `tokens` (an item and its stand-ins) followed by `error`, if any.
pub(crate) fn with_errors(tokens: TokenStream, error: Option<syn::Error>) -> TokenStream {
    match error {
        Some(error) => with_item(tokens, &error),
        None => tokens,
    }
}

/// Names each between `quote`s, joined with commas: `` `a`, `b` ``.
pub(crate) fn quoted(names: impl IntoIterator<Item = impl std::fmt::Display>, quote: char) -> String {
    names.into_iter().map(|n| format!("{quote}{n}{quote}")).collect::<Vec<_>>().join(", ")
}

/// Where to point an error about the kind of item an attribute is on.
pub(crate) fn item_span(item: &syn::Item) -> proc_macro2::Span {
    use syn::spanned::Spanned;
    match item {
        syn::Item::Struct(s) => s.struct_token.span,
        syn::Item::Enum(e) => e.enum_token.span,
        syn::Item::Impl(i) => i.impl_token.span,
        syn::Item::Mod(m) => m.mod_token.span,
        syn::Item::Fn(f) => f.sig.fn_token.span,
        syn::Item::Trait(t) => t.trait_token.span,
        other => other.span(),
    }
}
