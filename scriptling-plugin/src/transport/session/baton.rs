//! [`Baton`]: a session's reading, handed between its reading threads, so
//! that the thread that read a call can run it without waking anyone.
//!
//! The thread holding the reading may put it down to run the call it just
//! read ([`Baton::put_down_at`]) and takes it back when the call ends
//! ([`Baton::pick_up`]): the common case, no other thread involved. While
//! it is down it is *wanted* ([`Baton::want`]) when the plugin awaits an
//! answer from the host (which must be read) or the call has run for the
//! stall time ([`Baton::check`]); then a thread waiting in
//! [`Baton::take_turn`] takes it and reads on, and the thread whose call
//! ends finds it gone and waits in its place. A reading is put down only
//! while a thread waits to take it (checked in the same lock as the put:
//! [`Baton::put_down_at`] hands it back otherwise), so a reading that is wanted
//! is never left with nobody to take it, whatever fails to start. At any
//! moment the reading is held by one thread, or down, or ended.
//!
//! Threads are started before a put-down that finds none waiting
//! ([`Baton::reserve_thread`]), up to a bound: a session whose calls are
//! always read behind others and go to the pool has one; a host calling
//! one function at a time, or quick calls behind one another, two; a host calling a function that calls back, in a loop, three (one reads, one ends the call it ran, one waits: with
//! two, the next call is often read before the thread whose call just
//! ended waits again, and goes to the pool).

use std::time::{Duration, Instant};

use crate::support::sync::{Condvar, Mutex, lock, wait};

/// A session's reading (`T`), handed between its threads (see the module docs).
pub(crate) struct Baton<T> {
    state: Mutex<State<T>>,
    /// The waiting thread waits here for the reading to be wanted.
    turn: Condvar,
}

struct State<T> {
    /// The reading, while the thread that held it runs a call, and when
    /// it was put down.
    down: Option<(T, Instant)>,
    /// It is down and wanted: the waiting thread takes it.
    wanted: bool,
    /// Threads waiting in [`Baton::take_turn`].
    waiting: usize,
    /// Reading threads started (or being started).
    threads: usize,
    /// The most that may be.
    most: usize,
    /// A [`Baton::check`] is due (at most one is).
    watched: bool,
    /// Put down since the last check: the checks go on (see [`Baton::check`]).
    put_since_check: bool,
    /// The reading has ended: nobody takes it any more.
    ended: bool,
}

impl<T> State<T> {
    /// A reading put down now would be taken: the reading has not ended
    /// and a thread waits for it.
    fn could_put_down(&self) -> bool {
        !self.ended && self.waiting > 0
    }
}

/// What a [`Baton::check`] found.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum Check {
    /// The reading is held: no more checks until it is put down again.
    Held,
    /// Down for less than the stall time: check again after this long.
    Again(Duration),
    /// Down for the stall time: it was wanted.
    Overdue,
}

impl<T> Baton<T> {
    /// A reading held by the thread that makes it; at most `most` threads
    /// (that one included) take turns.
    pub(crate) fn new(most: usize) -> Self {
        let state = State {
            down: None,
            wanted: false,
            waiting: 0,
            threads: 1,
            most,
            watched: false,
            put_since_check: false,
            ended: false,
        };
        Baton { state: Mutex::new(state), turn: Condvar::new() }
    }

    /// Counts one more thread, waiting already, when none waits and one
    /// more may start: the caller starts it (its [`take_turn`] passes
    /// `fresh`), before putting the reading down. Returns whether to.
    ///
    /// [`take_turn`]: Self::take_turn
    pub(crate) fn reserve_thread(&self) -> bool {
        let mut state = lock(&self.state);
        if state.ended || state.waiting > 0 || state.threads >= state.most {
            return false;
        }
        state.threads += 1;
        state.waiting += 1;
        true
    }

    /// The thread [`reserve_thread`](Self::reserve_thread) counted could
    /// not be started: no more are asked for.
    pub(crate) fn start_failed(&self) {
        let mut state = lock(&self.state);
        state.threads -= 1;
        state.waiting -= 1;
        state.most = state.threads;
    }

    /// [`put_down_at`](Self::put_down_at) now.
    #[cfg(test)]
    pub(crate) fn put_down(&self, reading: T, awaited: impl FnOnce(&T) -> bool) -> Result<bool, T> {
        self.put_down_at(reading, Instant::now(), awaited)
    }

    /// Puts the reading down at `now` (the caller has read the clock for
    /// the call it runs), if a thread waits to take it and the reading
    /// has not ended (else it is handed back). It is wanted at once if
    /// `awaited(&reading)`, asked under the baton's lock: requests that
    /// await the host's answer and were registered while it was held
    /// wanted it in vain, and one registered after the question finds it
    /// down; else nobody is woken. `Ok(true)`: the caller must schedule a
    /// [`check`](Self::check) after the stall time (none is due yet).
    pub(crate) fn put_down_at(&self, reading: T, now: Instant, awaited: impl FnOnce(&T) -> bool) -> Result<bool, T> {
        let mut state = lock(&self.state);
        if !state.could_put_down() {
            return Err(reading);
        }
        let wanted = awaited(&reading);
        state.down = Some((reading, now));
        state.wanted = false;
        state.put_since_check = true;
        if wanted {
            self.want_locked(&mut state);
        }
        Ok(!std::mem::replace(&mut state.watched, true))
    }

    /// Takes the reading back once the call has ended; `None` when another
    /// thread took it (or it ended): wait your turn instead.
    pub(crate) fn pick_up(&self) -> Option<T> {
        let mut state = lock(&self.state);
        let (reading, _) = state.down.take()?;
        state.wanted = false;
        Some(reading)
    }

    /// Takes the reading back while the call that put it down waits on
    /// the host, to read the answer on this thread (no thread woken for
    /// it): only if it is still down and a thread waits to take it after,
    /// so that it can be put down again (a waiting thread leaves only by
    /// taking a reading that is down, or when the reading ends).
    pub(crate) fn take_back(&self) -> Option<T> {
        let mut state = lock(&self.state);
        if !state.could_put_down() {
            return None;
        }
        let (reading, _) = state.down.take()?;
        state.wanted = false;
        Some(reading)
    }

    /// The plugin awaits the host's answer: a reading that is down is to
    /// be taken by a waiting thread (one always waits while it is down).
    pub(crate) fn want(&self) {
        let mut state = lock(&self.state);
        self.want_locked(&mut state);
    }

    fn want_locked(&self, state: &mut State<T>) {
        if state.down.is_none() || state.wanted || state.ended {
            return;
        }
        state.wanted = true;
        self.turn.notify_one();
    }

    /// Looks at how long the reading has been down: wanted once it has
    /// been for `stall` (a call that blocks or computes for long must not
    /// hold up the reading beyond it). While calls keep being run, the
    /// checks go on every `stall` (a tick, rather than a check set and
    /// cancelled for every call: each would wake the timer's thread); they
    /// stop after one finds nothing put down since the last.
    pub(crate) fn check(&self, stall: Duration) -> Check {
        let mut state = lock(&self.state);
        let Some((_, since)) = state.down else {
            if std::mem::take(&mut state.put_since_check) {
                return Check::Again(stall);
            }
            state.watched = false;
            return Check::Held;
        };
        let elapsed = since.elapsed();
        if elapsed < stall {
            return Check::Again(stall - elapsed);
        }
        state.watched = false;
        self.want_locked(&mut state);
        Check::Overdue
    }

    /// Waits for the reading to be wanted and takes it; `None` once it has
    /// ended. A `fresh` thread was counted as waiting when it was reserved.
    pub(crate) fn take_turn(&self, fresh: bool) -> Option<T> {
        let mut state = lock(&self.state);
        if !fresh {
            state.waiting += 1;
        }
        loop {
            if state.ended {
                state.waiting -= 1;
                return None;
            }
            if state.wanted
                && let Some((reading, _)) = state.down.take()
            {
                state.wanted = false;
                state.waiting -= 1;
                return Some(reading);
            }
            state = wait(&self.turn, state);
        }
    }

    /// Ends the reading: the waiting threads leave, and a reading that is
    /// down is handed back to be dropped (its call still runs; nobody reads
    /// after it, and it cannot be put down again).
    pub(crate) fn end(&self) -> Option<T> {
        let mut state = lock(&self.state);
        state.ended = true;
        self.turn.notify_all();
        state.down.take().map(|(reading, _)| reading)
    }
}

#[cfg(all(test, not(scriptling_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_reading_is_put_down_only_with_a_thread_waiting_to_take_it() {
        let baton = Baton::new(2);
        assert_eq!(baton.put_down(7, |_| false), Err(7), "nobody waits");
        assert!(baton.reserve_thread());
        assert!(!baton.reserve_thread(), "one waits already");
        assert_eq!(baton.put_down(7, |_| false), Ok(true), "the first put-down asks for a check");
        assert_eq!(baton.pick_up(), Some(7));
        assert_eq!(baton.put_down(8, |_| false), Ok(false), "one check is due already");
        assert_eq!(baton.pick_up(), Some(8));
        let stall = Duration::from_millis(1);
        assert_eq!(baton.check(stall), Check::Again(stall), "put down since: the checks go on");
        assert_eq!(baton.check(stall), Check::Held, "nothing put down since: they stop");
        assert_eq!(baton.put_down(9, |_| false), Ok(true), "the check that found it held was the last one due");
        assert_eq!(baton.pick_up(), Some(9));
    }

    #[test]
    fn a_reading_is_taken_back_only_while_it_could_be_put_down_again() {
        let baton = Baton::new(2);
        assert!(baton.reserve_thread());
        assert_eq!(baton.put_down(1, |_| false), Ok(true));
        assert_eq!(baton.take_back(), Some(1), "down, and a thread waits");
        baton.want();
        assert_eq!(baton.put_down(1, |_| false), Ok(false), "the waiting thread still waits: down again, not wanted");
        assert_eq!(baton.pick_up(), Some(1));
        assert_eq!(baton.take_back(), None, "not down");
        let ended = Baton::new(2);
        assert!(ended.reserve_thread());
        assert_eq!(ended.put_down(2, |_| false), Ok(true));
        assert_eq!(ended.end(), Some(2));
        assert_eq!(ended.take_back(), None, "ended");
    }

    #[test]
    fn a_reading_put_down_while_answers_are_awaited_is_taken_at_once() {
        let baton = Baton::new(2);
        assert!(baton.reserve_thread());
        assert_eq!(baton.put_down(1, |_| true), Ok(true));
        assert_eq!(baton.take_turn(true), Some(1), "wanted as it went down");
    }

    #[test]
    fn a_wanted_reading_is_taken_by_the_waiting_thread() {
        let baton = Arc::new(Baton::new(2));
        assert!(baton.reserve_thread());
        let other = {
            let baton = Arc::clone(&baton);
            std::thread::spawn(move || baton.take_turn(true))
        };
        assert!(baton.put_down("reading", |_| false).is_ok());
        baton.want();
        assert_eq!(other.join().unwrap(), Some("reading"));
        assert_eq!(baton.pick_up(), None, "the other thread has it");
        assert!(!baton.reserve_thread(), "no more threads may start");
        assert_eq!(baton.put_down("again", |_| false), Err("again"), "and none waits");
    }

    #[test]
    fn a_reading_down_past_the_stall_time_is_wanted() {
        let baton = Baton::new(2);
        assert!(baton.reserve_thread());
        assert_eq!(baton.put_down(1, |_| false), Ok(true));
        assert!(matches!(baton.check(Duration::from_secs(60)), Check::Again(d) if d <= Duration::from_secs(60)));
        assert_eq!(baton.check(Duration::ZERO), Check::Overdue);
        assert_eq!(baton.take_turn(true), Some(1), "wanted: the waiting thread takes it");
    }

    #[test]
    fn a_thread_that_cannot_start_leaves_the_reading_to_its_holder() {
        let baton = Baton::new(3);
        assert!(baton.reserve_thread());
        baton.start_failed();
        assert!(!baton.reserve_thread(), "no more are asked for");
        assert_eq!(baton.put_down(1, |_| false), Err(1), "nobody would take it");
    }

    #[test]
    fn ending_hands_back_a_reading_that_is_down_and_releases_the_waiter() {
        let baton = Arc::new(Baton::<u8>::new(3));
        assert!(baton.reserve_thread());
        assert_eq!(baton.put_down(1, |_| false), Ok(true));
        assert_eq!(baton.end(), Some(1));
        assert_eq!(baton.take_turn(true), None);
        assert_eq!(baton.pick_up(), None);
        assert_eq!(baton.put_down(2, |_| false), Err(2), "ended: never put down again");
    }
}

/// Every interleaving of the hand-over (see ARCHITECTURE.md, "Model checks").
#[cfg(all(test, scriptling_loom))]
mod model {
    use super::*;
    use crate::support::sync::{AtomicUsize, Ordering, thread};
    use std::sync::Arc;

    /// The reading, which counts the threads holding it: never more than one.
    struct Reading(Arc<AtomicUsize>);

    impl Reading {
        fn held(self) -> Self {
            assert_eq!(self.0.fetch_add(1, Ordering::SeqCst), 0, "two threads hold the reading");
            self
        }
        fn released(self) -> Self {
            self.0.fetch_sub(1, Ordering::SeqCst);
            self
        }
    }

    /// The body of a reading thread: reads "lines" until `lines` is spent,
    /// running each as a call on this thread that may wait on the host;
    /// returns how many it read.
    fn reading_thread(baton: &Arc<Baton<Reading>>, mut held: Option<Reading>, lines: &AtomicUsize) -> usize {
        let mut read = 0;
        loop {
            let reading = match held.take() {
                Some(reading) => reading,
                None => match baton.take_turn(false) {
                    Some(reading) => reading.held(),
                    None => return read,
                },
            };
            if lines.fetch_sub(1, Ordering::SeqCst) == 0 {
                drop(baton.end());
                reading.released();
                return read;
            }
            read += 1;
            if let Err(reading) = baton.put_down(reading.released(), |_| false) {
                // Nobody waits to take it: read on.
                held = Some(reading.held());
                continue;
            }
            // The call waits on the host: the reading is wanted.
            baton.want();
            held = baton.pick_up().map(Reading::held);
        }
    }

    /// Two threads, one waiting: whatever the interleaving, one thread
    /// holds the reading at a time, every line is read once, and both
    /// threads end.
    #[test]
    fn the_reading_is_held_by_one_thread_and_never_lost() {
        crate::support::sync::model(|| {
            // Two threads, both there from the start.
            let baton = Arc::new(Baton::new(2));
            lock(&baton.state).threads = 2;
            let holders = Arc::new(AtomicUsize::new(0));
            let lines = Arc::new(AtomicUsize::new(2));
            let other = {
                let (baton, lines) = (Arc::clone(&baton), Arc::clone(&lines));
                thread::spawn(move || reading_thread(&baton, None, &lines))
            };
            let first = Reading(Arc::clone(&holders)).held();
            // Its first line waits until the other thread waits (a reading
            // is put down only then): with none waiting it reads on.
            let read = reading_thread(&baton, Some(first), &lines);
            let read = read + other.join().unwrap();
            assert_eq!(read, 2);
            assert_eq!(holders.load(Ordering::SeqCst), 0);
        });
    }

    /// Two threads: one waits for a turn (returning the reading it takes);
    /// the reading is down, put there by the other, the model's own.
    fn down_with_a_thread_waiting() -> (Arc<Baton<Reading>>, Arc<AtomicUsize>, thread::JoinHandle<Option<Reading>>) {
        let baton = Arc::new(Baton::new(2));
        lock(&baton.state).threads = 2;
        let holders = Arc::new(AtomicUsize::new(0));
        let waiting = {
            let baton = Arc::clone(&baton);
            thread::spawn(move || baton.take_turn(false).map(Reading::held))
        };
        let mut reading = Reading(Arc::clone(&holders));
        while let Err(back) = baton.put_down(reading, |_| false) {
            reading = back;
            thread::yield_now();
        }
        (baton, holders, waiting)
    }

    /// A call that ends as the stall check wants its reading: the reading
    /// goes to exactly one of the holder and the waiting thread.
    #[test]
    fn a_check_racing_the_end_of_a_call_gives_the_reading_to_one_thread() {
        crate::support::sync::model(|| {
            let (baton, holders, waiting) = down_with_a_thread_waiting();
            let checker = {
                let baton = Arc::clone(&baton);
                thread::spawn(move || baton.check(Duration::ZERO))
            };
            let mine = baton.pick_up().map(Reading::held);
            let _ = checker.join().unwrap();
            if mine.is_some() {
                // Kept by its holder: the waiter leaves when the reading ends.
                assert!(baton.end().is_none());
            }
            let theirs = waiting.join().unwrap();
            assert!(mine.is_some() != theirs.is_some(), "exactly one thread took the reading");
            assert_eq!(holders.load(Ordering::SeqCst), 1);
        });
    }

    /// A call waiting on the host takes its reading back to read the
    /// answer while the stall check (or another call's request) wants it:
    /// the reading goes to exactly one of them, and once the taker puts it
    /// down again a want brings it to the waiting thread.
    #[test]
    fn taking_the_reading_back_races_a_want_and_loses_nothing() {
        crate::support::sync::model(|| {
            let (baton, holders, waiting) = down_with_a_thread_waiting();
            let wanter = {
                let baton = Arc::clone(&baton);
                thread::spawn(move || baton.want())
            };
            if let Some(mine) = baton.take_back().map(Reading::held) {
                // Read its answer; down again, wanted for the wanter's
                // request, whose want found it held.
                assert!(baton.put_down(mine.released(), |_| true).is_ok(), "a thread still waits");
            }
            wanter.join().unwrap();
            let theirs = waiting.join().unwrap();
            assert!(theirs.is_some(), "the waiting thread has the reading in the end");
            assert_eq!(holders.load(Ordering::SeqCst), 1);
        });
    }

    /// The session ends while a call runs on the reading thread: the
    /// reading is handed back to the session, and both threads leave.
    #[test]
    fn ending_while_a_call_runs_leaves_nobody_reading() {
        crate::support::sync::model(|| {
            let baton = Arc::new(Baton::<u8>::new(2));
            lock(&baton.state).threads = 2;
            let waiting = {
                let baton = Arc::clone(&baton);
                thread::spawn(move || baton.take_turn(false))
            };
            while baton.put_down(1, |_| false).is_err() {
                thread::yield_now();
            }
            let session = {
                let baton = Arc::clone(&baton);
                thread::spawn(move || baton.end())
            };
            baton.want();
            let mine = baton.pick_up();
            let ended = session.join().unwrap();
            let theirs = waiting.join().unwrap();
            // The session, the waiter or the holder has it; only one.
            let holders = [mine, ended, theirs].iter().filter(|r| r.is_some()).count();
            assert_eq!(holders, 1);
            if theirs.is_none() && mine.is_none() {
                assert!(baton.take_turn(false).is_none(), "ended: nobody takes it again");
            }
        });
    }
}
