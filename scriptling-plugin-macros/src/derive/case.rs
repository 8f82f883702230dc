//! `rename_all` rules: a Rust name (a `snake_case` field or a `PascalCase`
//! variant) rewritten in another case.

/// The rules `rename_all` accepts, as written in the attribute.
pub(crate) const RULES: &[&str] = &[
    "lowercase",
    "UPPERCASE",
    "PascalCase",
    "camelCase",
    "snake_case",
    "SCREAMING_SNAKE_CASE",
    "kebab-case",
    "SCREAMING-KEBAB-CASE",
];

/// `name` under `rule` (one of [`RULES`]).
pub(crate) fn apply(rule: &str, name: &str) -> String {
    let words = words(name);
    let joined = |sep: &str, f: fn(&str) -> String| words.iter().map(|w| f(w)).collect::<Vec<_>>().join(sep);
    match rule {
        "lowercase" => joined("", |w| w.to_lowercase()),
        "UPPERCASE" => joined("", |w| w.to_uppercase()),
        "PascalCase" => joined("", capitalized),
        "camelCase" => {
            let pascal = joined("", capitalized);
            let mut chars = pascal.chars();
            chars.next().map_or_else(String::new, |first| first.to_lowercase().chain(chars).collect())
        }
        "snake_case" => joined("_", |w| w.to_lowercase()),
        "SCREAMING_SNAKE_CASE" => joined("_", |w| w.to_uppercase()),
        "kebab-case" => joined("-", |w| w.to_lowercase()),
        "SCREAMING-KEBAB-CASE" => joined("-", |w| w.to_uppercase()),
        _ => name.to_owned(),
    }
}

/// The words of a `snake_case` or `PascalCase` name: `max_len` and `MaxLen`
/// are both `max`, `len`; a run of capitals stays one word (`HTTPServer` is
/// `http`, `server`).
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let starts_word = c.is_uppercase()
            && !current.is_empty()
            && (chars[i - 1].is_lowercase()
                || chars[i - 1].is_ascii_digit()
                || chars.get(i + 1).is_some_and(|n| n.is_lowercase()));
        if starts_word {
            words.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words.into_iter().map(|w| w.to_lowercase()).collect()
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_variants_take_every_rule() {
        let cases = [
            ("lowercase", "maxlen", "maxlen"),
            ("UPPERCASE", "MAXLEN", "MAXLEN"),
            ("PascalCase", "MaxLen", "MaxLen"),
            ("camelCase", "maxLen", "maxLen"),
            ("snake_case", "max_len", "max_len"),
            ("SCREAMING_SNAKE_CASE", "MAX_LEN", "MAX_LEN"),
            ("kebab-case", "max-len", "max-len"),
            ("SCREAMING-KEBAB-CASE", "MAX-LEN", "MAX-LEN"),
        ];
        for (rule, from_field, from_variant) in cases {
            assert_eq!(apply(rule, "max_len"), from_field, "{rule} on a field");
            assert_eq!(apply(rule, "MaxLen"), from_variant, "{rule} on a variant");
        }
        assert_eq!(apply("snake_case", "HTTPServer"), "http_server");
        assert_eq!(apply("kebab-case", "Utf8Text"), "utf8-text");
    }
}
