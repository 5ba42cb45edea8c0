//! A Universal Binary JSON (draft 12) reader, for XGBoost's `.ubj` models: big-endian
//! numbers, strings with an integer length, and arrays/objects optionally "optimised" with a
//! `$` element type and a `#` count. Decoded into `serde_json::Value`, the form the JSON
//! importer reads.
//!
//! The input is untrusted: every count is checked against the bytes left before anything is
//! allocated (an element takes at least one byte), and nesting is limited, so no file can
//! make the reader allocate more than a small multiple of its size or overflow the stack.

use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// Deepest nesting accepted (XGBoost models nest about six levels).
const MAX_DEPTH: usize = 64;

/// A float as a JSON value: JSON has no NaN or infinity, so NaN becomes null and infinities
/// become ±1e39, beyond the float32 range (they read back as float32 infinities).
pub fn nonfinite_as_json(x: f64) -> Value {
    if x.is_nan() {
        Value::Null
    } else if x.is_infinite() {
        Value::from(x.signum() * 1e39)
    } else {
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// Decodes one UBJSON value that spans all of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    let mut r = Reader { bytes, at: 0 };
    let marker = r.marker()?;
    let value = r.value(marker, 0)?;
    if r.at != bytes.len() {
        return Err(r.error("bytes left over after the top-level value"));
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> Error {
        Error::model(format!("UBJSON at byte {}: {what}", self.at))
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.bytes.len() - self.at < n {
            return Err(self.error("unexpected end of data"));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().unwrap())
    }

    /// The next marker, skipping no-ops.
    fn marker(&mut self) -> Result<u8> {
        loop {
            let m = self.take(1)?[0];
            if m != b'N' {
                return Ok(m);
            }
        }
    }

    /// An integer value (a length or count) with its own marker.
    fn length(&mut self) -> Result<usize> {
        let m = self.marker()?;
        let n: i64 = match m {
            b'i' => i8::from_be_bytes(self.array()?) as i64,
            b'U' => self.take(1)?[0] as i64,
            b'I' => i16::from_be_bytes(self.array()?) as i64,
            b'l' => i32::from_be_bytes(self.array()?) as i64,
            b'L' => i64::from_be_bytes(self.array()?),
            _ => return Err(self.error(&format!("expected an integer length, found marker {:?}", m as char))),
        };
        if n < 0 {
            return Err(self.error(&format!("negative length {n}")));
        }
        // Every element or byte counted here takes at least one byte of input.
        if n as u64 > (self.bytes.len() - self.at) as u64 {
            return Err(self.error(&format!("length {n} exceeds the {} bytes left", self.bytes.len() - self.at)));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String> {
        let n = self.length()?;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| self.error("string is not UTF-8"))
    }

    fn float(x: f64) -> Value {
        nonfinite_as_json(x)
    }

    fn value(&mut self, marker: u8, depth: usize) -> Result<Value> {
        Ok(match marker {
            b'Z' => Value::Null,
            b'T' => Value::Bool(true),
            b'F' => Value::Bool(false),
            b'i' => Value::from(i8::from_be_bytes(self.array()?)),
            b'U' => Value::from(self.take(1)?[0]),
            b'I' => Value::from(i16::from_be_bytes(self.array()?)),
            b'l' => Value::from(i32::from_be_bytes(self.array()?)),
            b'L' => Value::from(i64::from_be_bytes(self.array()?)),
            b'd' => Self::float(f32::from_be_bytes(self.array()?) as f64),
            b'D' => Self::float(f64::from_be_bytes(self.array()?)),
            b'C' => Value::String((self.take(1)?[0] as char).to_string()),
            b'S' => Value::String(self.string()?),
            b'H' => {
                let text = self.string()?;
                let n: Number = text.parse().map_err(|_| self.error("malformed high-precision number"))?;
                Value::Number(n)
            }
            b'[' | b'{' => {
                if depth >= MAX_DEPTH {
                    return Err(self.error("nested too deeply"));
                }
                return self.container(marker == b'{', depth + 1);
            }
            m => return Err(self.error(&format!("unknown marker {:?}", m as char))),
        })
    }

    /// An array or object after its opening marker.
    fn container(&mut self, object: bool, depth: usize) -> Result<Value> {
        // Optional `$type` then `#count`; a type requires a count.
        let mut element_type = None;
        let mut count = None;
        if self.bytes.get(self.at) == Some(&b'$') {
            self.at += 1;
            element_type = Some(self.take(1)?[0]);
        }
        if self.bytes.get(self.at) == Some(&b'#') {
            self.at += 1;
            count = Some(self.length()?);
        } else if element_type.is_some() {
            return Err(self.error("a typed container needs a count"));
        }
        let close = if object { b'}' } else { b']' };
        let mut items = Vec::with_capacity(count.unwrap_or(0));
        let mut map = Map::new();
        let mut i = 0;
        loop {
            match count {
                Some(n) if i == n => break,
                None if self.bytes.get(self.at) == Some(&close) => {
                    self.at += 1;
                    break;
                }
                _ => {}
            }
            let key = if object { Some(self.string()?) } else { None };
            let marker = match element_type {
                Some(t) => t,
                None => self.marker()?,
            };
            let v = self.value(marker, depth)?;
            match key {
                Some(k) => {
                    map.insert(k, v);
                }
                None => items.push(v),
            }
            i += 1;
        }
        Ok(if object { Value::Object(map) } else { Value::Array(items) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_typed_and_untyped_containers() {
        // {"a": [1, 2.5f32], "b": "xy", "c": typed int8 array [1, -2], "d": true}
        let mut b = vec![b'{'];
        b.extend([b'U', 1, b'a', b'[', b'U', 1, b'd']);
        b.extend(2.5f32.to_be_bytes());
        b.push(b']');
        b.extend([b'U', 1, b'b', b'S', b'U', 2, b'x', b'y']);
        b.extend([b'U', 1, b'c', b'[', b'$', b'i', b'#', b'U', 2, 1, 0xFE]);
        b.extend([b'U', 1, b'd', b'T', b'}']);
        let v = decode(&b).unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, 2.5], "b": "xy", "c": [1, -2], "d": true}));
    }

    #[test]
    fn rejects_counts_beyond_the_input() {
        // A typed array claiming 2^40 float64 elements in a 20-byte input.
        let mut b = vec![b'[', b'$', b'D', b'#', b'L'];
        b.extend((1u64 << 40).to_be_bytes());
        let e = decode(&b).unwrap_err().to_string();
        assert!(e.contains("exceeds"), "{e}");
        assert!(decode(b"[U").is_err());
        assert!(decode(&vec![b'['; 10_000]).unwrap_err().to_string().contains("deeply"));
    }
}
