//! [`LineReader`]: newline-delimited frames with a size limit.

use std::io::{self, BufRead, BufReader, Read};

/// What one read produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A frame is in the buffer (without `\n` or a trailing `\r`).
    Frame,
    /// A line longer than the limit was skipped; it held at least this many bytes.
    TooLong(usize),
    /// The input ended.
    Eof,
}

pub(crate) struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
    /// A line over the limit is skipped as it streams past (`false`: it
    /// is reported as soon as it crosses the limit, and reading stops
    /// there: what follows cannot be trusted to be in step).
    skip_long: bool,
}

impl<R: Read> LineReader<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        Self { inner: BufReader::with_capacity(64 * 1024, inner), max, skip_long: true }
    }

    /// Reports a line over the limit as soon as it crosses it, without
    /// reading the rest (for a session that ends there).
    pub(crate) fn stop_at_long_lines(mut self) -> Self {
        self.skip_long = false;
        self
    }

    /// Whether a line over the limit ends the reading (see
    /// [`stop_at_long_lines`](Self::stop_at_long_lines)).
    pub(crate) fn stops_at_long_lines(&self) -> bool {
        !self.skip_long
    }

    /// The longest line accepted, in bytes.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// The first line in the buffer (without its newline), reading once if
    /// the buffer is empty, without consuming it; `None` unless it is there
    /// whole. For a caller that only wants the line if it is of one kind
    /// (see [`consume_line`](Self::consume_line)).
    pub(crate) fn peek_line(&mut self) -> io::Result<Option<&[u8]>> {
        let buffered = self.inner.fill_buf()?;
        Ok(buffered.iter().position(|&b| b == b'\n').map(|end| &buffered[..end]))
    }

    /// Drops the line [`peek_line`](Self::peek_line) returned.
    pub(crate) fn consume_line(&mut self) {
        if let Some(end) = self.inner.buffer().iter().position(|&b| b == b'\n') {
            self.inner.consume(end + 1);
        }
    }

    /// Whether a whole line waits in the buffer (read, not yet returned).
    pub(crate) fn has_line_buffered(&self) -> bool {
        self.inner.buffer().contains(&b'\n')
    }

    /// The source being read.
    pub(crate) fn source_mut(&mut self) -> &mut R {
        self.inner.get_mut()
    }

    /// Reads the next non-blank line into `buf`. A line over the limit is
    /// discarded as it streams past, never buffered whole.
    pub(crate) fn next(&mut self, buf: &mut Vec<u8>) -> io::Result<Line> {
        loop {
            buf.clear();
            let limit = u64::try_from(self.max).unwrap_or(u64::MAX).saturating_add(1);
            let n = (&mut self.inner).take(limit).read_until(b'\n', buf)?;
            if n == 0 {
                return Ok(Line::Eof);
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
            } else if buf.len() > self.max {
                let skipped = if self.skip_long { self.inner.skip_until(b'\n')? } else { 0 };
                let seen = buf.len() + skipped;
                buf.clear();
                return Ok(Line::TooLong(seen));
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            if !buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Line::Frame);
            }
        }
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Result<String, Line>> {
        let mut reader = LineReader::new(input, max);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match reader.next(&mut buf).unwrap() {
                Line::Frame => out.push(Ok(String::from_utf8(buf.clone()).unwrap())),
                Line::Eof => return out,
                other => out.push(Err(other)),
            }
        }
    }

    #[test]
    fn splits_skips_blanks_and_strips_cr() {
        assert_eq!(lines(b"a\r\n\n  \r\nb\nlast", 100), vec![Ok("a".into()), Ok("b".into()), Ok("last".into())]);
    }

    #[test]
    fn a_peeked_line_stays_until_consumed() {
        let mut reader = LineReader::new(&b"first\nsecond\n"[..], 100);
        assert_eq!(reader.peek_line().unwrap(), Some(&b"first"[..]));
        assert_eq!(reader.peek_line().unwrap(), Some(&b"first"[..]));
        reader.consume_line();
        let mut buf = Vec::new();
        assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
        assert_eq!(buf, b"second");
        assert_eq!(LineReader::new(&b"partial"[..], 100).peek_line().unwrap(), None);
    }

    #[test]
    fn long_lines_are_skipped_and_reading_continues() {
        let mut input = vec![b'x'; 50];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input, 10), vec![Err(Line::TooLong(51)), Ok("ok".into())]);
        assert_eq!(lines(b"exactly10!\n", 10), vec![Ok("exactly10!".into())]);
    }
}
