/** Run ffmpeg/ffprobe: collect stdout, hand stderr line by line to a callback, return the exit code. */
import { Command, type CommandExecutor } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect, Fiber, Stream } from "effect"

export interface Outcome {
  readonly exitCode: number
  readonly stdout: string
}

/**
 * Start `bin args…`, read both pipes concurrently and wait for the exit. The process is killed
 * when the effect is interrupted (e.g. by a timeout). A binary that cannot be started fails with
 * the PlatformError of the spawn (reason `NotFound` / `PermissionDenied`).
 */
export const run = (
  bin: string,
  args: ReadonlyArray<string>,
  onStderrLine: (line: string) => void = () => {}
): Effect.Effect<Outcome, PlatformError, CommandExecutor.CommandExecutor> =>
  Effect.scoped(
    Effect.gen(function* () {
      const proc = yield* Command.start(Command.make(bin, ...args))
      const stdout = yield* proc.stdout.pipe(Stream.decodeText(), Stream.mkString, Effect.fork)
      const stderr = yield* proc.stderr.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.runForEach((line) => Effect.sync(() => onStderrLine(line))),
        Effect.fork
      )
      const exitCode = yield* proc.exitCode
      yield* Fiber.join(stderr)
      return { exitCode: Number(exitCode), stdout: yield* Fiber.join(stdout) }
    })
  )
