//! Every shape `#[derive(FromValue, IntoValue)]` takes, used as parameters
//! and results.

use scriptling_plugin::{FromValue, IntoValue, Plugin, plugin_fn};

#[derive(FromValue, IntoValue)]
#[scriptling(rename_all = "kebab-case")]
struct Named {
    #[scriptling(rename = "n")]
    number: i64,
    #[scriptling(default)]
    flag: bool,
    #[scriptling(default = vec![1])]
    list: Vec<i64>,
    #[scriptling(skip)]
    cache: Option<String>,
    maybe: Option<f64>,
}

#[derive(FromValue, IntoValue)]
struct Newtype(String);

#[derive(FromValue, IntoValue)]
struct Pair(i64, String);

#[derive(FromValue, IntoValue)]
struct Unit;

#[derive(FromValue, IntoValue)]
#[scriptling(rename_all = "SCREAMING_SNAKE_CASE")]
enum Mode {
    FastPath,
    #[scriptling(rename = "slow")]
    SlowPath,
}

#[derive(FromValue, IntoValue)]
enum Shape {
    Empty,
    Circle(f64),
    Rect(f64, f64),
    Text { body: String, #[scriptling(default)] size: u8 },
}

#[derive(FromValue, IntoValue)]
struct Generic<T: FromValue + IntoValue, U>
where
    U: FromValue + IntoValue,
{
    first: T,
    second: Vec<U>,
}

#[derive(IntoValue)]
struct Borrowed<'a> {
    text: &'a str,
}

#[plugin_fn]
fn all(a: Named, b: Newtype, c: Pair, d: Unit, e: Mode, f: Shape, g: Generic<i64, String>) -> (Named, Newtype, Pair, Unit, Mode, Shape, Generic<i64, String>) {
    (a, b, c, d, e, f, g)
}

#[plugin_fn]
fn borrowed() -> Borrowed<'static> {
    Borrowed { text: "static" }
}

fn main() {
    let _ = Plugin::new("demo", "1.0.0", "").function::<all>().function::<borrowed>();
}
