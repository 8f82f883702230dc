//! [`LineReader`]: newline-delimited frames with a size limit, read through
//! a buffer that grows only for a host that sends more than it holds.

use std::io::{self, BufRead, Read};

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
    inner: Growing<R>,
    max: usize,
    /// The length of the last whole line longer than the largest read
    /// buffer (0: none yet): room reserved at once for the next such line.
    long: usize,
    /// A line over the limit is skipped as it streams past (`false`: it
    /// is reported as soon as it crosses the limit, and reading stops
    /// there: what follows cannot be trusted to be in step).
    skip_long: bool,
}

impl<R: Read> LineReader<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        Self { inner: Growing::new(inner), max, long: 0, skip_long: true }
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
    /// Whole blank lines at its front are dropped first (never reading):
    /// they are skipped anyway, and one alone says nothing more comes.
    pub(crate) fn has_line_buffered(&mut self) -> bool {
        loop {
            let buffer = self.inner.buffer();
            match memchr::memchr(b'\n', buffer) {
                Some(end) if buffer[..end].iter().all(u8::is_ascii_whitespace) => self.inner.consume(end + 1),
                found => return found.is_some(),
            }
        }
    }

    /// Whether any bytes wait in the buffer (a line begun, perhaps).
    pub(crate) fn has_bytes_buffered(&self) -> bool {
        !self.inner.buffer().is_empty()
    }

    /// The source being read.
    pub(crate) fn source_mut(&mut self) -> &mut R {
        self.inner.get_mut()
    }

    /// Reads the next non-blank line into `buf`. A line over the limit is
    /// discarded as it streams past, never buffered whole.
    pub(crate) fn next(&mut self, buf: &mut Vec<u8>) -> io::Result<Line> {
        loop {
            if let Some(line) = self.line(buf)? {
                return Ok(line);
            }
        }
    }

    /// Like [`next`](Self::next), from whole lines in the buffer only: the
    /// source is never read. `None`: no whole non-blank line is buffered.
    pub(crate) fn next_buffered(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Line>> {
        while self.has_line_buffered() {
            if let Some(line) = self.line(buf)? {
                return Ok(Some(line));
            }
        }
        Ok(None)
    }

    /// Reads the source once into an empty buffer: `false` at its end.
    pub(crate) fn fill(&mut self) -> io::Result<bool> {
        Ok(!self.inner.fill_buf()?.is_empty())
    }

    /// Reads one line into `buf`: `None` if it was blank.
    fn line(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Line>> {
        buf.clear();
        let n = self.read_until_newline(buf, self.max.saturating_add(1))?;
        if n == 0 {
            return Ok(Some(Line::Eof));
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > self.max {
            let skipped = if self.skip_long { self.inner.skip_until(b'\n')? } else { 0 };
            let seen = buf.len() + skipped;
            buf.clear();
            return Ok(Some(Line::TooLong(seen)));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok((!buf.iter().all(u8::is_ascii_whitespace)).then_some(Line::Frame))
    }

    /// Appends to `buf` up to and including the next newline, at most
    /// `limit` bytes; returns how many. `BufRead::read_until`, except that
    /// a line longer than the largest read buffer gets room at once for
    /// the last such line and an eighth more (a host sends payloads of a
    /// size again), within `limit`, where `Vec` would grow in steps up to
    /// it: each step copies the line so far into memory the allocator may
    /// have to fault in afresh, and every such line starts from nothing
    /// (the reader moves lines this long out whole). Figures:
    /// ARCHITECTURE.md, "A long line gets room for the last long line".
    fn read_until_newline(&mut self, buf: &mut Vec<u8>, limit: usize) -> io::Result<usize> {
        let (mut read, mut ended) = (0, false);
        while read < limit && !ended {
            let available = match self.inner.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let chunk = &available[..available.len().min(limit - read)];
            if chunk.is_empty() {
                break;
            }
            let used = match memchr::memchr(b'\n', chunk) {
                Some(end) => {
                    ended = true;
                    end + 1
                }
                None => chunk.len(),
            };
            if !ended && buf.capacity() - buf.len() < used {
                let expected = if read + used > MOST_READ { (self.long + self.long / 8).min(limit) } else { 0 };
                buf.reserve(used.max(expected.saturating_sub(buf.len())));
            }
            buf.extend_from_slice(&chunk[..used]);
            self.inner.consume(used);
            read += used;
        }
        // A line cut off at the limit is refused: it says nothing of the
        // next one's size.
        if ended && read > MOST_READ {
            self.long = read;
        }
        Ok(read)
    }
}

/// The read buffer's first size, and the most it grows to.
const FIRST_READ: usize = 8 * 1024;
const MOST_READ: usize = 64 * 1024;

/// A read buffer that starts at [`FIRST_READ`] bytes, allocated at the first
/// read, and doubles up to [`MOST_READ`] each time a read fills it (the
/// host had more to send than it held).
///
/// Why not `BufReader::with_capacity(64 KiB)`: std's default `read_buf`
/// (the one [`Input`](super::input::Input) has: implementing it is
/// unstable) zeroes the whole buffer at the first read, which at start-up
/// cost 16 page faults before the handshake answer and kept 64 KiB resident
/// in every idle plugin and every idle TCP connection. Requests of a few
/// hundred bytes never need more than the first size; large payloads read
/// at the full size from the fourth read on, and the buffer keeps it.
struct Growing<R> {
    source: R,
    /// Zeroed as it grows; `start..end` is read and not yet consumed.
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R> Growing<R> {
    fn new(source: R) -> Self {
        Growing { source, bytes: Vec::new(), start: 0, end: 0 }
    }

    fn buffer(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    fn get_mut(&mut self) -> &mut R {
        &mut self.source
    }
}

impl<R: Read> Read for Growing<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Growing<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.start == self.end {
            // Every read starts at 0, so a last read that ended at the end
            // filled the buffer (and before the first read both are 0).
            if self.end == self.bytes.len() && self.bytes.len() < MOST_READ {
                let grown = (self.bytes.len() * 2).clamp(FIRST_READ, MOST_READ);
                self.bytes.resize(grown, 0);
            }
            self.start = 0;
            self.end = 0;
            self.end = self.source.read(&mut self.bytes)?;
        }
        Ok(self.buffer())
    }

    fn consume(&mut self, amount: usize) {
        self.start = (self.start + amount).min(self.end);
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;

    /// A source that records the size of each read it is asked for.
    struct Sizes<'a> {
        data: &'a [u8],
        asked: Vec<usize>,
    }

    impl Read for Sizes<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.asked.push(out.len());
            self.data.read(out)
        }
    }

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
    fn blank_lines_alone_are_not_a_line_buffered() {
        let mut reader = LineReader::new(&b"a\n \r\n\nb\n\n"[..], 100);
        let mut buf = Vec::new();
        assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
        assert!(reader.has_line_buffered(), "b is behind the blank lines");
        assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
        assert_eq!(buf, b"b");
        assert!(!reader.has_line_buffered(), "only a blank line is left");
        assert!(!reader.has_bytes_buffered(), "and it is gone");
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
    fn the_buffer_grows_only_while_reads_fill_it() {
        let small = Sizes { data: b"{\"id\":1}\n{\"id\":2}\n", asked: Vec::new() };
        let mut reader = LineReader::new(small, 1 << 20);
        let mut buf = Vec::new();
        while reader.next(&mut buf).unwrap() != Line::Eof {}
        assert!(reader.source_mut().asked.iter().all(|&n| n == FIRST_READ), "{:?}", reader.source_mut().asked);

        let mut big = vec![b'x'; 300 * 1024];
        big.push(b'\n');
        let mut reader = LineReader::new(Sizes { data: &big, asked: Vec::new() }, 1 << 20);
        assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
        assert_eq!(buf.len(), 300 * 1024);
        let asked = &reader.source_mut().asked;
        assert_eq!(asked[..5], [FIRST_READ, 2 * FIRST_READ, 4 * FIRST_READ, MOST_READ, MOST_READ]);
        assert!(asked.iter().all(|&n| n <= MOST_READ));
    }

    #[test]
    fn a_long_line_gets_room_for_the_last_long_one_at_once() {
        let line = |len: usize| [vec![b'x'; len], vec![b'\n']].concat();
        let mib = 1 << 20;
        let input = [line(mib), line(mib + 10), line(100), line(20 << 10), line(3 * mib), line(mib)].concat();
        // At most 2 MiB a line, handed out 4 KiB a read (as a pipe may:
        // every longer line arrives in several reads); each is read into a
        // fresh buffer, as the reader moves long lines out.
        let pieces = input.chunks(4096).map(|piece| Some(piece.to_vec())).collect();
        let mut reader = LineReader::new(Pieces(pieces), 2 * mib);
        let mut read = || {
            let mut buf = Vec::new();
            let line = reader.next(&mut buf).unwrap();
            (line, buf.len(), buf.capacity())
        };
        let room = |after: usize| after + after / 8;
        // The first grows as a Vec does, in steps that each copy what it
        // has, past what it needs (here to 1.9 MiB).
        let (_, len, first) = read();
        assert_eq!(len, mib);
        assert!(first > room(mib + 1), "{first}");
        // The next gets the last one's length and an eighth more at once.
        let (_, len, second) = read();
        assert_eq!(len, mib + 10);
        assert!(second <= room(mib + 1), "{second} bytes for {len} after {}", mib + 1);
        // Lines no longer than the largest read buffer (the reader keeps
        // their buffer) reserve nothing, even when they come in many reads.
        let (_, len, short) = read();
        assert_eq!((len, short < 4096), (100, true), "{short} bytes for {len}");
        let (_, len, medium) = read();
        assert_eq!((len, medium < MOST_READ), (20 << 10, true), "{medium} bytes for {len}");
        // A line over the limit is refused, and says nothing of the next
        // one's size: that gets room for the last whole long line.
        assert!(matches!(read().0, Line::TooLong(seen) if seen > 2 * mib));
        let (_, len, last) = read();
        assert_eq!(len, mib);
        assert!(last <= room(mib + 11), "{last} bytes for {len} after {}", mib + 11);
    }

    /// A source that hands out its data in scripted pieces, an error
    /// where a piece is `None`.
    struct Pieces(Vec<Option<Vec<u8>>>);

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            match self.0.remove(0) {
                None => Err(io::ErrorKind::Interrupted.into()),
                Some(mut piece) => {
                    let n = piece.len().min(out.len());
                    if n < piece.len() {
                        self.0.insert(0, Some(piece.split_off(n)));
                    }
                    out[..n].copy_from_slice(&piece[..n]);
                    Ok(n)
                }
            }
        }
    }

    #[test]
    fn a_short_read_stops_the_growth_and_an_interrupted_read_loses_nothing() {
        let mut line = vec![b'y'; 10 * 1024];
        line.push(b'\n');
        // 8 KiB (full: grow), an interruption mid-line, the rest (short).
        let (first, rest) = line.split_at(FIRST_READ);
        let pieces = Pieces(vec![Some(first.to_vec()), None, Some(rest.to_vec()), Some(b"next\n".to_vec())]);
        let mut reader = LineReader::new(pieces, 1 << 20);
        let mut buf = Vec::new();
        assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
        assert_eq!(buf.len(), 10 * 1024, "the line whole across the interruption");
        assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
        assert_eq!(buf, b"next");
        assert_eq!(reader.inner.bytes.len(), 2 * FIRST_READ, "grown once, after the one full read");
    }

    /// A stopped session still reads what the host sent before the stop,
    /// beyond the first buffer's 8 KiB. (Unix: a pipe there holds it all
    /// unread; a Windows pipe holds 4 KiB.)
    #[cfg(unix)]
    #[test]
    fn a_stopped_input_still_reads_what_was_sent_before_the_stop() {
        use crate::sys::Stop;
        use crate::transport::session::input::Input;
        use std::io::Write;
        use std::sync::Arc;

        let (read_end, mut write_end) = std::io::pipe().unwrap();
        let line = |i: usize| format!("{{\"id\":{i},\"pad\":\"{}\"}}\n", "p".repeat(1000));
        let sent: Vec<String> = (0..30).map(line).collect();
        write_end.write_all(sent.concat().as_bytes()).unwrap();
        let stop = Arc::new(Stop::new().unwrap());
        stop.stop();
        let mut reader = LineReader::new(Input::new(read_end, Arc::clone(&stop)), 1 << 20);
        let mut buf = Vec::new();
        for expected in &sent {
            assert_eq!(reader.next(&mut buf).unwrap(), Line::Frame);
            assert_eq!(buf, expected.trim_end().as_bytes());
        }
        assert!(reader.next(&mut buf).is_err(), "then the reads are stopped");
    }

    #[test]
    fn long_lines_are_skipped_and_reading_continues() {
        let mut input = vec![b'x'; 50];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input, 10), vec![Err(Line::TooLong(51)), Ok("ok".into())]);
        assert_eq!(lines(b"exactly10!\n", 10), vec![Ok("exactly10!".into())]);
    }
}
