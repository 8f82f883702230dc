//! The stdio event loop.
//!
//! ```text
//! stdin ─► reader thread ─► parse ─┬─ response to our request ─► its waiter
//!                                  └─ request ─► sync pool / task ─► handler
//! stdout ◄─ FrameWriter (one frame per write, flushed) ◄─ responses, callbacks, logs
//! ```
//!
//! stdin is read on a dedicated thread so that a handler waiting for the
//! host's answer to a callback can never block the reader that delivers it.
//! `plugin.shutdown` is answered at once; then in-flight calls finish (for
//! up to the shutdown grace), every live object is dropped and serving ends
//! without waiting for stdin to close. EOF ends serving the same way.

use std::io::{Read, Write};
use std::sync::{Arc, OnceLock};

use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::connection::{Connection, Control};
use crate::error::{ErrorCode, RpcError, ServeError};
use crate::plugin::Core;
use crate::pool::SyncPool;
use crate::rpc;
use crate::transport::guard;
use crate::transport::lines::{Line, LineReader};
use crate::writer::FrameWriter;

/// Serves on stdio with a runtime of its own.
///
/// The stdin reader starts before the runtime is built, so the host's
/// handshake is answered while the runtime's threads are still starting.
pub(crate) fn run(core: Core) -> Result<(), ServeError> {
    return_large_buffers_to_the_system();
    let out = guard::take_stdout()?;
    let runtime = Arc::new(OnceLock::new());
    let session = Session::start(Arc::new(core), std::io::stdin(), out, Arc::clone(&runtime))?;
    let rt = super::runtime()?;
    let _ = runtime.set(rt.handle().clone());
    let result = rt.block_on(session.finish());
    // Handlers still running past the grace period are abandoned, not waited for.
    rt.shutdown_background();
    result
}

/// Serves on stdio on the current runtime.
pub(crate) async fn serve_stdio(core: Core) -> Result<(), ServeError> {
    let out = guard::take_stdout()?;
    serve_connection(Arc::new(core), std::io::stdin(), out).await
}

/// Serves one host over a byte stream pair until shutdown or EOF, on the
/// current runtime.
pub(crate) async fn serve_connection<R, W>(core: Arc<Core>, input: R, output: W) -> Result<(), ServeError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let runtime = Arc::new(OnceLock::new());
    let _ = runtime.set(Handle::current());
    Session::start(core, input, output, runtime)?.finish().await
}

/// One stdio session: the reader runs from `start`; `finish` waits for
/// shutdown or EOF on the runtime and cleans up.
struct Session {
    conn: Arc<Connection>,
    control: mpsc::UnboundedReceiver<Control>,
}

impl Session {
    fn start<R, W>(core: Arc<Core>, input: R, output: W, runtime: Arc<OnceLock<Handle>>) -> Result<Session, ServeError>
    where
        R: Read + Send + 'static,
        W: Write + Send + 'static,
    {
        let (control_tx, control) = mpsc::unbounded_channel();
        let max = core.options.max_frame_bytes;
        let pool = Arc::new(SyncPool::new(Some(Arc::clone(&runtime)), crate::pool::parallelism()));
        let conn = Arc::new(Connection::new(core, FrameWriter::new(Box::new(output)), control_tx, true, pool, runtime));
        let reader_conn = Arc::clone(&conn);
        std::thread::Builder::new()
            .name("scriptling-plugin-stdin".into())
            .spawn(move || read_loop(&reader_conn, LineReader::new(input, max)))?;
        Ok(Session { conn, control })
    }

    async fn finish(mut self) -> Result<(), ServeError> {
        let conn = &self.conn;
        let grace = conn.core.options.shutdown_grace;
        let why = self.control.recv().await.unwrap_or(Control::Eof);
        conn.begin_shutdown();
        if why == Control::Eof {
            // Nobody can answer callbacks any more: fail them so their calls end.
            conn.outgoing.close("the host closed the connection");
        }
        if !conn.inflight.wait_idle(grace).await {
            eprintln!(
                "scriptling-plugin: {} call(s) still running after {grace:?}; exiting without them",
                conn.inflight.count()
            );
        }
        conn.outgoing.close("the plugin is shutting down");
        // The host never destroys objects itself on close: drop every one now.
        let remaining = conn.core.objects.drain(None);
        if !remaining.is_empty() {
            let _ = tokio::task::spawn_blocking(move || crate::objects::release(remaining)).await;
        }
        Ok(())
    }
}

fn read_loop<R: Read>(conn: &Arc<Connection>, mut reader: LineReader<R>) {
    let mut buf = Vec::new();
    loop {
        match reader.next(&mut buf) {
            Ok(Line::Frame) => conn.handle_line(&buf),
            Ok(Line::TooLong(len)) => {
                let err = RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "invalid request: the line of at least {len} bytes exceeds the limit of {} bytes",
                        conn.core.options.max_frame_bytes
                    ),
                );
                let mut frame = Vec::new();
                rpc::write_error(&mut frame, None, &err);
                conn.writer.write_frame(frame);
            }
            Ok(Line::Eof) => break,
            Err(e) => {
                eprintln!("scriptling-plugin: reading from the host failed: {e}");
                break;
            }
        }
        // Do not keep a huge payload's buffer alive for the rest of the session.
        if buf.capacity() > 1 << 20 {
            buf = Vec::new();
        }
    }
    conn.input_closed();
}

/// Makes glibc serve allocations of 1 MiB and more with their own mappings,
/// returned to the system when freed.
///
/// By default glibc raises that threshold after large frees, so later large
/// payload buffers come from per-thread arenas that keep them: with requests
/// handled on several threads, a plugin that saw five 16 MiB payloads held
/// ~99 MiB at peak; with the threshold fixed it holds ~36 MiB. Only `run`
/// does this (it owns the process); with another global allocator it has no
/// effect.
fn return_large_buffers_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; it is safe to call at
    // any time, and this runs before the plugin starts its threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
