use scriptling_plugin::{FromValue, Value};

#[derive(FromValue)]
struct Name<'a> {
    text: &'a str,
}

fn main() {
    let name = Name::from_value(Value::from("x"));
    let _ = name.map(|n| n.text.len());
}
