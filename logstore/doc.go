// Package logstore keeps the logs of build steps, live while a build runs and
// afterwards, readable by offset and length like Azkaban's LogData.
//
// # Store
//
// A Store is a directory. A build ID such as "myapp/test/42" maps to the
// nested directory myapp/test/42/@ under it: every '/'-separated segment is
// percent-escaped so only [A-Za-z0-9._-] and '%' reach the filesystem, and
// IDs that could escape or alias a directory (empty, absolute, "." or ".."
// segments, NUL bytes) are rejected with ErrInvalidID naming the ID. The "@"
// data directory can never be an escaped segment, so one build ID being a
// prefix of another is harmless. Per build it holds:
//
//	index         escaped step names, one per line, in creation order
//	<step>.log    the step's bytes
//	<step>.done   present once the step log is complete
//	<step>.times  when each append was written (marks.go): its offset, the
//	              newlines before it and the time; logs from before have
//	              none and still read, without times
//
// Appends are plain write(2) calls under an flock(2) of the log file: they
// reach the OS at once (no fsync), and writers in several goroutines or
// processes sharing the directory are serialised. AppendAt appends only at
// a given offset, which makes retried chunks idempotent. Once a step log is
// finished it accepts no more appends (ErrComplete).
//
// Read returns a Chunk of at most MaxReadLength (1 MiB) bytes; Wait blocks a
// follower until there is more to read or the log is complete: appends in
// the same process wake it at once, appends by another process within 250 ms.
//
// ReadLines and LinesBefore read whole lines with their numbers and times,
// page by page in either direction; LineOffset finds a line by number. The
// log file stays the bytes the steps wrote, so a raw download is exact.
//
// # Executors
//
// An executor writing to a local Store hands Store.Sink to runner.Run. An
// executor on another machine uses NewRemoteSink, which ships each step's
// output to the HTTP API served by NewHTTPHandler (see there for the routes
// and NewRemoteSink for buffering, retries and the drop policy), with the
// times it saw each write (LogMarksHeader), so lines keep their own times.
//
// # Archive
//
// With SetArchive, every step log the store finishes is copied to a blob
// store (SLUICE_BLOB_URL) under logs/<escaped build segments>/@/<seq>.<escaped
// step>.log, seq being the step's position in the build's index. Read, Stat,
// Steps and Wait fall back to the archive for the logs the directory lacks,
// so API replicas without a shared volume all serve finished logs. Prune and
// DeletePipeline clean the archive too. With FlushLive running, the replica
// receiving a live log's appends also copies what it gained to the blob
// store every second as chunk objects (live.go), so other replicas read
// running builds' logs too, at most a second behind; the chunks go when the
// log is archived. A remote writer's appends for one log must still reach
// one replica (or the replicas share the directory).
//
// A step log is written once: a build attempt that runs again (after an
// executor died) should log under its own build ID, e.g. with an attempt
// suffix, because a finished log refuses appends and a remote writer refuses
// to continue a log it did not start.
package logstore
