//! The one generator of call shims: a `Function` whose handler takes each
//! argument from `Args` (errors spanned at the parameter's type), reaches
//! the object for methods, calls the Rust item and converts its result,
//! sync or `async`; plus the parameter declarations and help text.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ReturnType, Signature, Type};

use crate::params::{self, Param};

/// How a method reaches the object it is called on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receiver {
    /// `&self`: a shared lock, so calls may overlap.
    Shared,
    /// `&mut self`: an exclusive lock.
    Exclusive,
}

/// What a shim calls.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A function (or an associated one): its `IntoCallResult` result is
    /// the call's.
    Function,
    /// A constructor of the class: its `Self` or `Result<Self, E>` becomes
    /// a new object.
    Constructor(&'a Type),
    /// A method of the class, on the object reached through its receiver.
    Method(&'a Type, Receiver),
}

/// Everything a shim is generated from.
pub(crate) struct Shim<'a> {
    /// The exported name: an expression of a `&'static str` or `String`.
    pub(crate) name: TokenStream,
    /// The item to call: `greet`, `<Counter>::inc`.
    pub(crate) callee: TokenStream,
    pub(crate) target: Target<'a>,
    pub(crate) params: &'a [Param],
    pub(crate) is_async: bool,
    /// Where errors about the conversion of the result point: the return type.
    pub(crate) ret_span: Span,
    /// For a `Result<T, E>` return type (any path ending in `Result`, so
    /// `io::Result<T>` and aliases too), where `T` is: errors about the
    /// value point at the type that lacks `IntoValue`, not at the `Result`.
    pub(crate) ok_span: Option<Span>,
    /// Where the generated code points otherwise: the item's name.
    pub(crate) span: Span,
    pub(crate) doc: &'a str,
}

impl<'a> Shim<'a> {
    /// The shim of a free function with signature `sig`; class members set
    /// their `target` on top.
    pub(crate) fn new(
        sig: &Signature,
        name: TokenStream,
        callee: TokenStream,
        params: &'a [Param],
        doc: &'a str,
    ) -> Self {
        Shim {
            name,
            callee,
            target: Target::Function,
            params,
            is_async: sig.asyncness.is_some(),
            ret_span: match &sig.output {
                ReturnType::Type(_, ty) => ty.span(),
                ReturnType::Default => sig.ident.span(),
            },
            ok_span: match &sig.output {
                ReturnType::Type(_, ty) => result_ok_type(ty).map(Spanned::span),
                ReturnType::Default => None,
            },
            span: sig.ident.span(),
            doc,
        }
    }

    /// `Function::new(..)` or `Function::new_async(..)`, with its parameter
    /// declarations and description.
    pub(crate) fn function(&self) -> TokenStream {
        let krate = quote!(::scriptling_plugin);
        let args = args_ident();
        let name = &self.name;
        let (takes, bindings) = take_args(self.params);
        let this = format_ident!("__scriptling_this");
        let guard = format_ident!("__scriptling_guard");
        let (shared, exclusive, wait) = if self.is_async {
            (quote!(read_async), quote!(write_async), quote!(.await))
        } else {
            (quote!(read), quote!(write), quote!())
        };
        let (reach, lock, borrow) = match self.target {
            Target::Function | Target::Constructor(_) => (quote!(), quote!(), quote!()),
            Target::Method(ty, receiver) => {
                let reach = quote!(let #this = #krate::__private::receiver::<#ty>(#args)?;);
                match receiver {
                    Receiver::Shared => {
                        (reach, quote!(let #guard = #krate::__private::#shared(&#this) #wait?;), quote!(&*#guard,))
                    }
                    Receiver::Exclusive => (
                        reach,
                        quote!(let mut #guard = #krate::__private::#exclusive(&#this) #wait?;),
                        quote!(&mut *#guard,),
                    ),
                }
            }
        };
        let callee = &self.callee;
        let finish = self.finish(quote!(#callee(#borrow #(#bindings),*) #wait));
        let span = self.span;
        let handler = if self.is_async {
            quote_spanned!(span=>
                #krate::Function::new_async(#name, move |#args: &mut #krate::Args| {
                    #reach
                    #takes
                    ::core::result::Result::Ok(async move {
                        #lock
                        #finish
                    })
                })
            )
        } else {
            quote_spanned!(span=>
                #krate::Function::new(#name, move |#args: &mut #krate::Args| {
                    #reach
                    #takes
                    #lock
                    #finish
                })
            )
        };
        let makers = default_makers(self.params);
        let declare = declare_params(self.params);
        let description = description(self.doc);
        quote!({ #makers #handler #declare #description })
    }

    /// Converts the call's result, spanned at the return type so a type
    /// that cannot be returned is reported there.
    ///
    /// The conversion is written out with the public traits rather than
    /// through a helper trait over `T` and `Result<T, E>`: with two candidate
    /// impls the compiler stops at the outer type and names the helper, while
    /// a direct `IntoValue` bound leads it to the innermost type that lacks
    /// it (`Hit` in `Result<Vec<Hit>, E>`).
    fn finish(&self, call: TokenStream) -> TokenStream {
        let krate = quote!(::scriptling_plugin);
        let ret = Ident::new("__scriptling_ret", self.ret_span);
        let value = |span: Span, v: &Ident| match self.target {
            // A typed binding: a wrong return type is a plain "expected
            // `Counter`, found `i64`" at the return type.
            Target::Constructor(self_ty) => quote_spanned!(span=> {
                let __scriptling_object: #self_ty = #v;
                #krate::__private::constructed(__scriptling_object)
            }),
            Target::Function | Target::Method(..) => {
                quote_spanned!(span=> #krate::__private::returned(#krate::IntoValue::into_value(#v)))
            }
        };
        let convert = match self.ok_span {
            Some(ok_span) => {
                let ok = Ident::new("__scriptling_ok", ok_span);
                let value = value(ok_span, &ok);
                // A `CallError` is kept whole, anything else `Display` is
                // shown (`__private::Failure` explains the pick).
                let err = quote_spanned!(self.ret_span=> {
                    // Only one of the two is picked.
                    #[allow(unused_imports)]
                    use #krate::__private::{KeepCallError as _, ShowError as _};
                    let __scriptling_failure = #krate::__private::Failure::new(__scriptling_err);
                    (&__scriptling_failure).kind().into_call_error(__scriptling_failure)
                });
                quote!(match #ret {
                    ::core::result::Result::Ok(#ok) => #value,
                    ::core::result::Result::Err(__scriptling_err) => ::core::result::Result::Err(#err),
                })
            }
            None => value(self.ret_span, &ret),
        };
        quote!({
            let #ret = #call;
            #convert
        })
    }
}

/// `T` in a return type `Result<T, ..>` (the last path segment named
/// `Result` or ending in it: `io::Result<T>`, `anyhow::Result<T>`, an alias
/// such as `ParseResult<T>`).
fn result_ok_type(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if !last.ident.to_string().ends_with("Result") {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    match args.args.first()? {
        syn::GenericArgument::Type(ok) => Some(ok),
        _ => None,
    }
}

/// The name of the `&mut Args` closure parameter in generated code.
fn args_ident() -> Ident {
    format_ident!("__scriptling_args")
}

/// `let __scriptling_argN: T = args.take(N)?;` for each parameter, and the
/// binding names in order.
fn take_args(params: &[Param]) -> (TokenStream, Vec<Ident>) {
    let args = args_ident();
    let bindings: Vec<Ident> = (0..params.len()).map(|i| format_ident!("__scriptling_arg{}", i)).collect();
    let takes = params.iter().zip(&bindings).enumerate().map(|(i, (p, binding))| {
        let ty = &p.ty;
        let take = match &p.default {
            None => quote_spanned!(ty.span()=> #args.take::<#ty>(#i)?),
            Some(_) => {
                let default = default_ident(i);
                quote_spanned!(ty.span()=> #args.take_or_else::<#ty>(#i, #default)?)
            }
        };
        quote!(let #binding: #ty = #take;)
    });
    (quote!(#(#takes)*), bindings)
}

/// The closure that makes parameter `index`'s default.
fn default_ident(index: usize) -> Ident {
    format_ident!("__scriptling_default{}", index)
}

/// `let __scriptling_defaultN = || -> T { <default> };` for each parameter
/// with a default. The handler (for each call without the argument) and
/// the help text (once) both call it, so the user's expression is
/// type-checked once and a mistake in it is reported once.
fn default_makers(params: &[Param]) -> TokenStream {
    let makers = params.iter().enumerate().filter_map(|(i, p)| {
        let default = p.default.as_ref()?;
        let (ty, ident, value) = (&p.ty, default_ident(i), params::default_value(default));
        // The default is the user's expression in a closure: when it is a
        // bare call, clippy would blame their code for the closure.
        Some(quote!(#[allow(clippy::redundant_closure)] let #ident = || -> #ty { #value };))
    });
    quote!(#(#makers)*)
}

/// `.param("name")` / `.optional_param("name", <shown default>)` calls.
fn declare_params(params: &[Param]) -> TokenStream {
    let declare = params.iter().enumerate().map(|(i, p)| {
        let name = &p.name;
        match &p.default {
            None => quote!(.param(#name)),
            Some(default) => {
                let shown = params::shown_default(p, default, &default_ident(i));
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
