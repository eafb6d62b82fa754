//! tmux formats (`-F`, `display-message -p`): `#{name}` variables, the
//! one-letter aliases (`#S`, `#I`, `#P`, ...), conditionals `#{?c,a,b}`
//! (chained as `#{?c1,a,c2,b,else}`), comparisons `#{==:a,b}` `#{!=:a,b}`
//! `#{<:a,b}` ..., `#{||:a,b}` `#{&&:a,b}`, `#{m:pattern,text}`, and the
//! modifiers tools use: `=N:` (truncate), `b:` `d:` (basename, dirname),
//! `l:` (literal), `n:` (length), `t:` (a time), `s/from/to/:`, `q:` (shell
//! quote), `e|op|:a,b` (arithmetic). As in tmux, an unknown variable is
//! empty and a malformed form is output as far as it was understood; a
//! format never fails.

/// What a format's variables are looked up in.
pub trait Lookup {
    fn get(&self, name: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String>> Lookup for F {
    fn get(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// Deepest nesting of `#{...}` expanded: a bound on the work a hostile
/// format can ask for.
const MAX_DEPTH: usize = 32;

pub fn expand(format: &str, vars: &dyn Lookup) -> String {
    expand_at(format, vars, 0)
}

fn expand_at(format: &str, vars: &dyn Lookup, depth: usize) -> String {
    let mut out = String::new();
    let mut rest = format;
    while let Some(at) = rest.find('#') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let mut chars = after.chars();
        match chars.next() {
            Some('{') => {
                let Some(end) = matching_brace(&after[1..]) else {
                    // Unterminated: output what is left as it is.
                    out.push_str(&rest[at..]);
                    return out;
                };
                let inner = &after[1..1 + end];
                if depth < MAX_DEPTH {
                    out.push_str(&expand_braces(inner, vars, depth + 1));
                }
                rest = &after[end + 2..];
            }
            Some(c @ ('#' | ',' | '}')) => {
                out.push(c);
                rest = &after[1..];
            }
            Some(c) => match alias(c) {
                Some(name) => {
                    out.push_str(&vars.get(name).unwrap_or_default());
                    rest = &after[c.len_utf8()..];
                }
                None => {
                    out.push('#');
                    rest = after;
                }
            },
            None => {
                out.push('#');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// tmux's one-letter aliases.
fn alias(c: char) -> Option<&'static str> {
    Some(match c {
        'D' => "pane_id",
        'F' => "window_flags",
        'H' => "host",
        'h' => "host_short",
        'I' => "window_index",
        'P' => "pane_index",
        'S' => "session_name",
        'T' => "pane_title",
        'W' => "window_name",
        _ => return None,
    })
}

/// The index of the `}` closing a `#{` whose content starts `s`.
fn matching_brace(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 2;
                continue;
            }
            b'#' => {
                // `#}` and `#,` are escapes, not structure.
                i += 2;
                continue;
            }
            b'{' => depth += 1,
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits at commas outside nested braces.
fn split_top(s: &str) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut parts = Vec::new();
    let (mut depth, mut start, mut i) = (0usize, 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'#' if matches!(bytes.get(i + 1), Some(b',' | b'}' | b'#')) => {
                i += 2;
                continue;
            }
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&s[start..]);
    parts
}

/// A part of a form that is itself a format or, when plain, a variable.
fn operand(part: &str, vars: &dyn Lookup, depth: usize) -> String {
    if part.contains('#') {
        expand_at(part, vars, depth)
    } else {
        vars.get(part).unwrap_or_else(|| part.to_string())
    }
}

fn truthy(value: &str) -> bool {
    !value.is_empty() && value != "0"
}

fn expand_braces(inner: &str, vars: &dyn Lookup, depth: usize) -> String {
    if let Some(cond) = inner.strip_prefix('?') {
        let parts = split_top(cond);
        let mut i = 0;
        while i + 1 < parts.len() {
            let value = if parts[i].contains('#') {
                expand_at(parts[i], vars, depth)
            } else {
                vars.get(parts[i]).unwrap_or_default()
            };
            if truthy(&value) {
                return expand_at(parts[i + 1], vars, depth);
            }
            i += 2;
        }
        return parts
            .get(i)
            .filter(|_| i < parts.len())
            .map(|p| expand_at(p, vars, depth))
            .unwrap_or_default();
    }
    if let Some((modifier, body)) = split_modifier(inner) {
        return apply_modifier(modifier, body, vars, depth);
    }
    vars.get(inner).unwrap_or_default()
}

/// `MOD:body` where MOD is one of the known modifiers.
fn split_modifier(inner: &str) -> Option<(&str, &str)> {
    let colon = inner.find(':')?;
    let modifier = &inner[..colon];
    if modifier.contains('#') || modifier.contains('{') {
        return None;
    }
    let known = matches!(
        modifier,
        "==" | "!="
            | "<"
            | ">"
            | "<="
            | ">="
            | "||"
            | "&&"
            | "m"
            | "b"
            | "d"
            | "l"
            | "n"
            | "t"
            | "q"
            | "E"
            | "T"
    ) || modifier.starts_with('=')
        || modifier.starts_with("s/")
        || modifier.starts_with("e|")
        || modifier.starts_with("m/");
    known.then(|| (modifier, &inner[colon + 1..]))
}

fn apply_modifier(modifier: &str, body: &str, vars: &dyn Lookup, depth: usize) -> String {
    let bool_str = |b: bool| if b { "1" } else { "0" }.to_string();
    let two = || {
        let parts = split_top(body);
        let a = operand(parts.first().copied().unwrap_or(""), vars, depth);
        let b = operand(parts.get(1).copied().unwrap_or(""), vars, depth);
        (a, b)
    };
    match modifier {
        "==" => {
            let (a, b) = two();
            bool_str(a == b)
        }
        "!=" => {
            let (a, b) = two();
            bool_str(a != b)
        }
        "<" | ">" | "<=" | ">=" => {
            let (a, b) = two();
            let ord = a.cmp(&b);
            bool_str(match modifier {
                "<" => ord.is_lt(),
                ">" => ord.is_gt(),
                "<=" => ord.is_le(),
                _ => ord.is_ge(),
            })
        }
        "||" => {
            let (a, b) = two();
            bool_str(truthy(&a) || truthy(&b))
        }
        "&&" => {
            let (a, b) = two();
            bool_str(truthy(&a) && truthy(&b))
        }
        "m" | "m/r" | "m/i" | "m/ri" => {
            let (pattern, text) = two();
            bool_str(glob_match(pattern.as_bytes(), text.as_bytes()))
        }
        "l" => body.to_string(),
        "b" => {
            let v = operand(body, vars, depth);
            v.rsplit('/').next().unwrap_or("").to_string()
        }
        "d" => {
            let v = operand(body, vars, depth);
            match v.rfind('/') {
                Some(0) => "/".into(),
                Some(i) => v[..i].to_string(),
                None => ".".into(),
            }
        }
        "n" => operand(body, vars, depth).chars().count().to_string(),
        "q" => shell_quote(&operand(body, vars, depth)),
        "t" => {
            let v = operand(body, vars, depth);
            v.parse::<i64>().map(format_time).unwrap_or_default()
        }
        "E" | "T" => {
            let v = operand(body, vars, depth);
            expand_at(&v, vars, depth + 1)
        }
        m if m.starts_with("s/") => substitute(m, &operand(body, vars, depth)),
        m if m.starts_with("e|") => arithmetic(m, body, vars, depth),
        m => {
            // `=N` (first N characters) or `=-N` (last N).
            let v = operand(body, vars, depth);
            match m[1..].parse::<i64>() {
                Ok(n) if n >= 0 => v.chars().take(n as usize).collect(),
                Ok(n) => {
                    let len = v.chars().count();
                    let keep = (n.unsigned_abs() as usize).min(len);
                    v.chars().skip(len - keep).collect()
                }
                Err(_) => v,
            }
        }
    }
}

fn substitute(modifier: &str, value: &str) -> String {
    // s/from/to/ (flags after the last slash are ignored).
    let mut parts = modifier[2..].splitn(3, '/');
    let from = parts.next().unwrap_or("");
    let to = parts.next().unwrap_or("");
    if from.is_empty() {
        return value.to_string();
    }
    value.replace(from, to)
}

fn arithmetic(modifier: &str, body: &str, vars: &dyn Lookup, depth: usize) -> String {
    let op = modifier.trim_start_matches("e|").trim_end_matches('|');
    let parts = split_top(body);
    let num = |i: usize| {
        operand(parts.get(i).copied().unwrap_or("0"), vars, depth)
            .trim()
            .parse::<i64>()
            .unwrap_or(0)
    };
    let (a, b) = (num(0), num(1));
    let r = match op.trim_end_matches('f') {
        "+" => a.checked_add(b),
        "-" => a.checked_sub(b),
        "*" => a.checked_mul(b),
        "/" => a.checked_div(b),
        "%" | "m" => a.checked_rem(b),
        "==" => Some((a == b) as i64),
        "!=" => Some((a != b) as i64),
        "<" => Some((a < b) as i64),
        ">" => Some((a > b) as i64),
        "<=" => Some((a <= b) as i64),
        ">=" => Some((a >= b) as i64),
        _ => None,
    };
    r.map(|v| v.to_string()).unwrap_or_default()
}

fn shell_quote(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if "|&;<>()$`\\\"' \t*?[#~=%".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A Unix time in seconds as tmux's `t:` shows it (`ctime` form, UTC).
fn format_time(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        d,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        y
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// fnmatch(3) without flags: `*`, `?`, `[...]`. Iterative with one
/// backtrack point, so its work is bounded by the lengths' product.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(&pattern[p..], text[t]) {
                        if matched {
                            p += next;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == b'[' {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                c if c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against a `[...]` class at the start of `pattern`: whether
/// it matched and the class's length, or `None` when it is not closed.
fn class(pattern: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pattern.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < pattern.len() {
        if pattern[i] == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&e| e != b']') {
            if (pattern[i]..=pattern[i + 2]).contains(&c) {
                matched = true;
            }
            i += 3;
        } else {
            if pattern[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        Some(
            match name {
                "session_name" => "work",
                "window_index" => "1",
                "pane_id" => "%3",
                "pane_active" => "1",
                "pane_dead" => "0",
                "pane_current_path" => "/home/me/src",
                "empty" => "",
                _ => return None,
            }
            .to_string(),
        )
    }

    fn x(f: &str) -> String {
        expand(f, &vars)
    }

    #[test]
    fn variables_aliases_and_escapes() {
        assert_eq!(x("#{session_name}:#{window_index}.#{pane_id}"), "work:1.%3");
        assert_eq!(x("#S:#I #D"), "work:1 %3");
        assert_eq!(x("## #, #} #{nosuch}|"), "# , } |");
        assert_eq!(x("a#"), "a#");
        assert_eq!(x("#{unterminated"), "#{unterminated");
    }

    #[test]
    fn conditionals_nest_and_chain() {
        assert_eq!(x("#{?pane_active,yes,no}"), "yes");
        assert_eq!(x("#{?pane_dead,dead,alive}"), "alive");
        assert_eq!(x("#{?empty,a,b}"), "b");
        assert_eq!(x("#{?pane_dead,a,#{?pane_active,b,c}}"), "b");
        assert_eq!(x("#{?pane_dead,a,empty,b,c}"), "c");
        assert_eq!(x("#{?#{==:#{session_name},work},hit,miss}"), "hit");
        assert_eq!(x("#{?pane_active,[#{pane_id}#,x],no}"), "[%3,x]");
    }

    #[test]
    fn comparisons_and_modifiers() {
        assert_eq!(x("#{==:#{session_name},work}"), "1");
        assert_eq!(x("#{!=:#{session_name},work}"), "0");
        assert_eq!(x("#{||:pane_dead,pane_active}"), "1");
        assert_eq!(x("#{&&:pane_dead,pane_active}"), "0");
        assert_eq!(x("#{m:w*k,#{session_name}}"), "1");
        assert_eq!(
            x("#{b:pane_current_path}|#{d:pane_current_path}"),
            "src|/home/me"
        );
        assert_eq!(x("#{=2:session_name}#{=-2:session_name}"), "work");
        assert_eq!(x("#{n:session_name}"), "4");
        assert_eq!(x("#{s/or/OR/:session_name}"), "wORk");
        assert_eq!(x("#{e|+|:window_index,2}"), "3");
        assert_eq!(x("#{l:#{session_name}}"), "#{session_name}");
        assert_eq!(x("#{t:0}"), "Thu Jan  1 00:00:00 1970");
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"lib*_test?", b"libtmux_test1"));
        assert!(glob_match(b"[a-c]x", b"bx"));
        assert!(!glob_match(b"[!a-c]x", b"bx"));
        assert!(!glob_match(b"a*b", b"acd"));
        assert!(glob_match(b"*", b""));
    }

    #[test]
    fn hostile_formats_are_bounded() {
        let deep = "#{?".repeat(10_000) + &"}".repeat(10_000);
        let _ = x(&deep);
        let wide = "#{session_name}".repeat(10_000);
        assert_eq!(x(&wide).len(), 40_000);
    }
}
