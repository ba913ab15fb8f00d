/**
 * Exit codes of `muse` and the error that carries one.
 *
 * | code | meaning |
 * |------|---------|
 * | 0    | success |
 * | 1    | failed: model or tool failure, bad input, a replay that diverged |
 * | 2    | usage or configuration error (bad flag, bad config file, no API key) |
 * | 3    | a budget (turns, tokens, time) ran out before the task was done |
 * | 4    | `muse resume` found nothing to do: the session's task had ended, or it has none |
 * | 130  | interrupted (SIGINT / Ctrl-C): the turn was stopped and recorded; `muse resume` goes on with it |
 * | 143  | terminated (SIGTERM): the same, for a stop asked by the system |
 */
import { Data } from "effect"

export const ExitCode = {
  Success: 0,
  Failed: 1,
  Usage: 2,
  Budget: 3,
  NothingToResume: 4,
  Interrupted: 130,
  Terminated: 143
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/** A failure with a message for the user and the exit code it maps to. */
export class CliError extends Data.TaggedError("CliError")<{
  readonly message: string
  readonly code: ExitCode
  /** Printed after the message (hints, the no-key screen). */
  readonly detail?: string | undefined
}> {}

export const usageError = (message: string, detail?: string) => new CliError({ message, code: ExitCode.Usage, detail })

export const failed = (message: string, detail?: string) => new CliError({ message, code: ExitCode.Failed, detail })
