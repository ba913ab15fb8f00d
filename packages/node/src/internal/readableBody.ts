/**
 * A Node `Readable` (an HTTP response) read as an Effect `Stream` or in full, without
 * `@effect/platform-node`: the stream pulls with `read()` on `readable` events, as that package's
 * `NodeStream.fromReadable` does, and leaves the readable open when done (its owner decides).
 *
 * @example
 * ```ts
 * const chunks = toStream(res, (cause) => new Error(String(cause)))
 * const bytes = readAll(res, (cause) => new Error(String(cause)))
 * ```
 */
import type { Readable } from "node:stream"
import { Channel, Chunk, Effect, Exit, Stream } from "effect"

/** The readable's chunks as they arrive; ends with the readable, fails with its error. */
export const toStream = <E>(readable: Readable, onError: (cause: unknown) => E): Stream.Stream<Uint8Array, E> =>
  Stream.fromChannel(
    Channel.suspend(() => {
      if (!readable.readable) return Channel.void
      let exit: Exit.Exit<void, E> | undefined
      const latch = Effect.unsafeMakeLatch(false)
      const onReadable = () => latch.unsafeOpen()
      const onErr = (cause: unknown) => {
        exit = Exit.fail(onError(cause))
        latch.unsafeOpen()
      }
      const onEnd = () => {
        exit = Exit.void
        latch.unsafeOpen()
      }
      readable.on("readable", onReadable)
      readable.on("error", onErr)
      readable.on("end", onEnd)
      const loop = (): Channel.Channel<Chunk.Chunk<Uint8Array>, unknown, E> => {
        let item = readable.read() as Uint8Array | null
        if (item === null) {
          if (exit !== undefined) return Channel.fromEffect(exit)
          latch.unsafeClose()
          return Channel.flatMap(latch.await, loop)
        }
        const items = [item]
        while ((item = readable.read() as Uint8Array | null) !== null) items.push(item)
        return Channel.flatMap(Channel.write(Chunk.unsafeFromArray(items)), loop)
      }
      return Channel.ensuring(
        Channel.suspend(loop),
        Effect.sync(() => {
          readable.off("readable", onReadable)
          readable.off("error", onErr)
          readable.off("end", onEnd)
        })
      )
    })
  )

/**
 * The readable's bytes, once it has ended. `onInterrupt` is called when the caller gives up
 * before the end.
 */
export const readAll = <E>(
  readable: Readable,
  onError: (cause: unknown) => E,
  onInterrupt: () => void
): Effect.Effect<Buffer, E> =>
  Effect.async<Buffer, E>((resume) => {
    const chunks: Array<Buffer> = []
    const onData = (chunk: Buffer) => void chunks.push(chunk)
    const onErr = (cause: unknown) => {
      off()
      resume(Effect.fail(onError(cause)))
    }
    const onEnd = () => {
      off()
      resume(Effect.succeed(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    }
    const off = () => {
      readable.off("data", onData)
      readable.off("error", onErr)
      readable.off("end", onEnd)
    }
    if (readable.readableEnded) return resume(Effect.succeed(Buffer.alloc(0)))
    if (readable.destroyed) return resume(Effect.fail(onError(readable.errored ?? new Error("the body was closed"))))
    readable.on("data", onData)
    readable.once("error", onErr)
    readable.once("end", onEnd)
    return Effect.sync(() => {
      off()
      onInterrupt()
    })
  })
