/**
 * A scripted language model for tests and demos: `MUSE_MODEL=scripted/<name>` (with
 * `MUSE_SCRIPT_DIR` naming the folder of `<name>.json`) or the hidden flag `--script <file.json>`.
 * It never touches the network. It is a testing aid: it is refused unless one of those two is
 * given, so a real session cannot end up on it by accident.
 *
 * The script answers each request from the prompt alone (so a resumed session gets the same
 * answers): see `choose`.
 *
 * ```json
 * { "replies": [
 *     { "when": "fix", "steps": [
 *         { "text": "Reading it.", "tools": [{ "name": "read_file", "params": { "path": "sum.js" } }] },
 *         { "text": "Fixed.", "usage": { "input": 1200, "output": 40 } } ] },
 *     { "steps": [{ "text": "Hello!", "chunkDelayMs": 20 }] } ] }
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { LanguageModel, type Prompt, type Response } from "@effect/ai"
import { SessionRuntime } from "@musekit/node"
import { Duration, Effect, Either, Layer, ParseResult, Schema, Stream } from "effect"
import { CliError, ExitCode } from "./exit.js"

const Step = Schema.Struct({
  text: Schema.optional(Schema.String),
  tools: Schema.optional(
    Schema.Array(
      Schema.Struct({
        name: Schema.String,
        params: Schema.optional(Schema.Unknown),
        id: Schema.optional(Schema.String)
      })
    )
  ),
  /** Wait this long before the reply starts. */
  delayMs: Schema.optional(Schema.Number),
  /** Wait this long between streamed words. */
  chunkDelayMs: Schema.optional(Schema.Number),
  usage: Schema.optional(
    Schema.Struct({ input: Schema.optional(Schema.Number), output: Schema.optional(Schema.Number) })
  ),
  /** Fail the model call with this message. */
  error: Schema.optional(Schema.String)
})
export type Step = typeof Step.Type

const Entry = Schema.Struct({
  /** Substring of the newest user message (case-insensitive), or `/regex/`. */
  when: Schema.optional(Schema.String),
  /** Agent name or role (`main`, `worker`, `worker-1`, …). */
  agent: Schema.optional(Schema.String),
  steps: Schema.Array(Step)
})

export const Script = Schema.Struct({
  replies: Schema.optional(Schema.Array(Entry)),
  steps: Schema.optional(Schema.Array(Step))
})
export type Script = typeof Script.Type

export const PREFIX = "scripted/"

export const isScripted = (spec: string): boolean => spec.startsWith(PREFIX)

/** The file a `scripted/<name>` spec names, or why there is none. */
export const scriptFile = (
  spec: string,
  options: { readonly scriptFlag?: string | undefined; readonly env?: NodeJS.ProcessEnv | undefined }
): Either.Either<string, CliError> => {
  if (options.scriptFlag) return Either.right(path.resolve(options.scriptFlag))
  const dir = (options.env ?? process.env).MUSE_SCRIPT_DIR
  const name = spec.slice(PREFIX.length)
  if (!dir) {
    return Either.left(
      new CliError({
        code: ExitCode.Usage,
        message: `${spec} is a scripted test model; it needs MUSE_SCRIPT_DIR (the folder of ${name}.json) or --script <file.json>.`,
        detail: "Scripted models are a testing aid. For real work pick a provider: --model anthropic/claude-sonnet-4-5"
      })
    )
  }
  if (!/^[\w.-]+$/.test(name)) {
    return Either.left(new CliError({ code: ExitCode.Usage, message: `bad scripted model name '${name}'` }))
  }
  return Either.right(path.join(dir, `${name}.json`))
}

export const load = (file: string): Either.Either<Script, CliError> => {
  let json: unknown
  try {
    json = JSON.parse(fs.readFileSync(file, "utf8"))
  } catch (e) {
    return Either.left(new CliError({ code: ExitCode.Usage, message: `script ${file}: ${(e as Error).message}` }))
  }
  return Either.mapLeft(
    Schema.decodeUnknownEither(Script, { onExcessProperty: "error" })(json),
    (e) =>
      new CliError({
        code: ExitCode.Usage,
        message: `script ${file} is not valid: ${ParseResult.TreeFormatter.formatErrorSync(e)}`
      })
  )
}

const agentOf = (prompt: Prompt.Prompt): string => {
  const system = prompt.content.find((m) => m.role === "system")
  const text = system && typeof system.content === "string" ? system.content : ""
  return /You are ([\w-]+), a persistent member/.exec(text)?.[1] ?? "main"
}

const userText = (m: Prompt.Message): string =>
  m.role === "user"
    ? m.content
        .filter((p) => p.type === "text")
        .map((p) => (p as Prompt.TextPart).text)
        .join("\n")
    : ""

/** A tool message whose results say the turn stopped in the middle of the call. */
const wasInterrupted = (m: Prompt.Message): boolean =>
  m.role === "tool" &&
  m.content.some((p) => {
    const result = (p as Prompt.ToolResultPart).result as { readonly error?: unknown } | undefined
    return typeof result?.error === "string" && result.error.startsWith("interrupted:")
  })

const matches = (when: string | undefined, text: string): boolean => {
  if (when === undefined) return true
  if (when.length > 2 && when.startsWith("/") && when.endsWith("/"))
    return new RegExp(when.slice(1, -1), "i").test(text)
  return text.toLowerCase().includes(when.toLowerCase())
}

const agentMatches = (filter: string | undefined, agent: string): boolean =>
  filter === undefined || filter === "*" || filter === agent || agent.replace(/-\d+$/, "") === filter

/**
 * The step that answers a prompt: the first entry (in script order) for this agent that matches a
 * user message and still has steps left, counting the assistant messages after the newest user
 * message it matches. A message arriving mid-task (a crew report, between tool steps) does not
 * derail the task's steps; its own entry answers once the task's entry has run out. A user
 * message that opens a new turn retires the entries of earlier turns. Scripted tool-call ids end
 * with `-e<entry>s<step>`: mid-task, the newest reply's ids give the place in the entry, so a
 * compaction that folds earlier steps (or the user message) away does not send the script back.
 */
export const choose = (
  script: Script,
  prompt: Prompt.Prompt
): {
  readonly step: Step
  readonly index: number
  /** The entry and the step in it (absent for the "no reply" answer). */
  readonly entry?: number
  readonly stepIndex?: number
} => {
  const agent = agentOf(prompt)
  const messages = prompt.content
  const assistants = messages.filter((m) => m.role === "assistant").length
  const entries = [...(script.replies ?? []), ...(script.steps ? [{ steps: script.steps }] : [])] as ReadonlyArray<
    typeof Entry.Type
  >
  let newest = ""
  for (let i = messages.length - 1; i >= 0 && newest === ""; i--) newest = userText(messages[i]!).trim()
  // a user message that opens a turn of its own (not one delivered between tool steps, like a
  // crew report) after message `after`: the user moved on
  // (a message after a tool call the turn was stopped in the middle of opens a turn of its own;
  // a notice from muse, such as a takeover's, does not)
  const movedOnAfter = (after: number) =>
    messages.some(
      (m, i) =>
        i > after &&
        m.role === "user" &&
        userText(m).trim() !== "" &&
        !userText(m).startsWith(SessionRuntime.NOTICE_PREFIX) &&
        (messages[i - 1]!.role !== "tool" || wasInterrupted(messages[i - 1]!))
    )
  // Mid-task, the newest reply's tool-call ids say which entry and step it was: the place in the
  // entry survives a compaction that folded the earlier steps (and the user message) away.
  let lastReply = messages.length - 1
  while (lastReply >= 0 && messages[lastReply]!.role !== "assistant") lastReply--
  if (lastReply >= 0 && !movedOnAfter(lastReply)) {
    const reply = messages[lastReply]!
    const mark = (reply.role === "assistant" ? reply.content : [])
      .map((p) => (p.type === "tool-call" ? STEP_MARK.exec(p.id) : null))
      .find((m) => m !== null)
    const entry = mark ? entries[Number(mark[1])] : undefined
    const step = entry && agentMatches(entry.agent, agent) ? entry.steps[Number(mark![2]) + 1] : undefined
    if (step) return { step, index: assistants, entry: Number(mark![1]), stepIndex: Number(mark![2]) + 1 }
  }
  for (const [e, entry] of entries.entries()) {
    if (!agentMatches(entry.agent, agent)) continue
    let at = -1
    for (let i = messages.length - 1; i >= 0; i--) {
      const text = userText(messages[i]!)
      if (text.trim() !== "" && matches(entry.when, text)) {
        at = i
        break
      }
    }
    if (at < 0 || movedOnAfter(at)) continue
    const stepIndex = messages.slice(at + 1).filter((m) => m.role === "assistant").length
    const step = entry.steps[stepIndex]
    if (step) return { step, index: assistants, entry: e, stepIndex }
  }
  return {
    step: { text: `(the script has no reply for ${agent} here: "${newest.slice(0, 60)}")` },
    index: assistants
  }
}

/** The end of a scripted tool-call id: `-e<entry>s<step>`. */
const STEP_MARK = /-e(\d+)s(\d+)$/

const usageOf = (s: Step) => {
  const input = s.usage?.input ?? 100
  const output = s.usage?.output ?? 20
  return { inputTokens: input, outputTokens: output, totalTokens: input + output }
}

const partsOf = (
  s: Step,
  index: number,
  place?: { readonly entry?: number | undefined; readonly stepIndex?: number | undefined }
): Array<Response.StreamPartEncoded> => {
  const mark = place?.entry !== undefined ? `-e${place.entry}s${place.stepIndex ?? 0}` : ""
  if (s.error !== undefined) return [{ type: "error", error: s.error }]
  const out: Array<Response.StreamPartEncoded> = []
  if (s.text) {
    out.push({ type: "text-start", id: "t" })
    for (const delta of s.text.split(/(?<= )/)) out.push({ type: "text-delta", id: "t", delta })
    out.push({ type: "text-end", id: "t" })
  }
  for (const [i, c] of (s.tools ?? []).entries()) {
    out.push({
      type: "tool-call",
      id: c.id ?? `call_${index + 1}_${i + 1}${mark}`,
      name: c.name,
      params: c.params ?? {},
      providerExecuted: false
    })
  }
  out.push({ type: "finish", reason: (s.tools ?? []).length > 0 ? "tool-calls" : "stop", usage: usageOf(s) })
  return out
}

export interface Options {
  /** Called at each request (for startup measurements). */
  readonly onRequest?: (() => void) | undefined
}

/** The `LanguageModel` layer for a script. */
export const layer = (script: Script, options: Options = {}): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (opts) =>
        Effect.sync(() => {
          options.onRequest?.()
          const chosen = choose(script, opts.prompt)
          const parts = partsOf(chosen.step, chosen.index, chosen)
          const text = parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")
          return [
            ...(text ? [{ type: "text" as const, text }] : []),
            ...parts.filter((p) => p.type === "tool-call" || p.type === "finish" || p.type === "error")
          ] as Array<Response.PartEncoded>
        }),
      streamText: (opts) =>
        Stream.unwrap(
          Effect.sync((): Stream.Stream<Response.StreamPartEncoded> => {
            options.onRequest?.()
            const chosen = choose(script, opts.prompt)
            const step = chosen.step
            const parts: Stream.Stream<Response.StreamPartEncoded> = Stream.fromIterable(
              partsOf(step, chosen.index, chosen)
            )
            const chunkDelay = step.chunkDelayMs ?? 0
            const paced =
              chunkDelay > 0
                ? Stream.mapEffect(
                    parts,
                    (p): Effect.Effect<Response.StreamPartEncoded> =>
                      p.type === "text-delta"
                        ? Effect.as(Effect.sleep(Duration.millis(chunkDelay)), p)
                        : Effect.succeed(p)
                  )
                : parts
            const delay = step.delayMs ?? 0
            return delay > 0
              ? Stream.concat(Stream.drain(Stream.fromEffect(Effect.sleep(Duration.millis(delay)))), paced)
              : paced
          })
        )
    })
  )
