/**
 * Token counting for prompts, with gpt-tokenizer (`o200k_base`, the encoding of GPT-4o and later).
 *
 * A message counts the text the model reads: text and reasoning parts, the tool name and JSON
 * arguments of a tool call, the tool name and output of a tool result (a string output as is,
 * anything else as JSON), a fixed estimate per file part, plus a small overhead per message. Text
 * is counted in slices of about 1,000 characters cut at whitespace, because the tokenizer is
 * quadratic on long runs without spaces (a minified bundle, base64, CJK text); on ordinary text the
 * count is exact or within a few tokens. Other providers tokenize differently, so treat counts as
 * estimates and leave headroom (the compaction plugin triggers well below the window).
 *
 * A `Counter` caches the count of each message (by object identity, then by a hash of its JSON),
 * so counting a growing history costs only the new messages. Encoded messages (the agent's history)
 * and decoded ones (a `Prompt.Prompt` a provider receives) count the same.
 *
 * @example
 * ```ts
 * import { Tokens } from "@musekit/plugin-compaction"
 *
 * Tokens.countText("hello world") // 2
 * const counter = Tokens.makeCounter()
 * counter.messages([{ role: "user", content: "Fix the failing test in src/a.ts" }]) // 13
 * // every request a language model received, system prompt included:
 * // Tokens.countPrompt(prompt) // prompt: Prompt.Prompt
 * ```
 */
import type { Prompt } from "@effect/ai"
import { Model } from "@musekit/core"
import { encode } from "gpt-tokenizer"

/** Tokens added per message for its role and framing (as in OpenAI's chat format). */
export const MESSAGE_OVERHEAD = 4

/** Tokens added per tool call or tool result part for its framing. */
export const PART_OVERHEAD = 3

/** Estimate for one file part (an image or document); providers bill these differently. */
export const FILE_TOKENS = 1_000

/** Length of the slices long text is counted in. */
export const SLICE_CHARS = 1_000

const noSpecial = { disallowedSpecial: new Set<string>() }

const countSlice = (text: string): number => encode(text, noSpecial).length

/**
 * Tokens of a text. Text longer than `SLICE_CHARS` is counted in slices cut just before a
 * whitespace character near the slice end (where the tokenizer would split anyway), or at the
 * slice end when there is none, which bounds the time on pathological input.
 */
export const countText = (text: string): number => {
  if (text.length === 0) return 0
  if (text.length <= SLICE_CHARS) return countSlice(text)
  let total = 0
  let start = 0
  while (start < text.length) {
    let end = Math.min(start + SLICE_CHARS, text.length)
    if (end < text.length) {
      const floor = end - Math.floor(SLICE_CHARS / 4)
      let cut = end
      while (cut > floor && !isSpace(text.charCodeAt(cut))) cut--
      if (cut > floor) end = cut
    }
    total += countSlice(text.slice(start, end))
    start = end
  }
  return total
}

const isSpace = (c: number) => c === 32 || c === 10 || c === 9 || c === 13

/** The text a tool output is shown to the model as: a string as is, anything else as JSON. */
export const outputText = (value: unknown): string =>
  typeof value === "string" ? value : (JSON.stringify(value ?? null) ?? "null")

/** A message of a prompt, encoded (history) or decoded (`Prompt.Message`): both count the same. */
export type AnyMessage = Prompt.MessageEncoded | Prompt.Message

const countPart = (part: any): number => {
  switch (part?.type) {
    case "text":
    case "reasoning":
      return countText(String(part.text ?? ""))
    case "tool-call":
      return PART_OVERHEAD + countText(String(part.name)) + countText(outputText(part.params))
    case "tool-result":
      return PART_OVERHEAD + countText(String(part.name)) + countText(outputText(part.result))
    case "file":
      return FILE_TOKENS
    default:
      return 0
  }
}

/** Tokens of one message, uncached. */
export const countMessage = (message: AnyMessage): number => {
  const content = (message as { content: unknown }).content
  if (typeof content === "string") return MESSAGE_OVERHEAD + countText(content)
  let total = MESSAGE_OVERHEAD
  if (Array.isArray(content)) for (const p of content) total += countPart(p)
  return total
}

export interface Counter {
  /** Tokens of a text (system prompts are cached by value). */
  readonly text: (text: string) => number
  /** Tokens of one message (cached). */
  readonly message: (message: AnyMessage) => number
  /** Tokens of a list of messages (each cached). */
  readonly messages: (messages: ReadonlyArray<AnyMessage>) => number
  /** Cache statistics, for benchmarks. */
  readonly stats: () => { readonly hits: number; readonly misses: number; readonly size: number }
}

/** A counter with a bounded cache (`maxEntries` message counts, oldest evicted first). */
export const makeCounter = (options: { readonly maxEntries?: number | undefined } = {}): Counter => {
  const maxEntries = options.maxEntries ?? 20_000
  const byObject = new WeakMap<object, number>()
  const byJson = new Map<string, number>()
  let hits = 0
  let misses = 0
  const remember = (key: string, n: number) => {
    byJson.set(key, n)
    if (byJson.size > maxEntries) byJson.delete(byJson.keys().next().value!)
  }
  const text = (t: string) => {
    if (t.length < 64) return countText(t)
    const key = `t${t.length}:${Model.hash53(t)}`
    const known = byJson.get(key)
    if (known !== undefined) {
      hits++
      return known
    }
    misses++
    const n = countText(t)
    remember(key, n)
    return n
  }
  const message = (m: AnyMessage) => {
    const cached = byObject.get(m)
    if (cached !== undefined) {
      hits++
      return cached
    }
    const json = JSON.stringify(m, jsonSafe)
    const key = `m${json.length}:${Model.hash53(json)}`
    let n = byJson.get(key)
    if (n === undefined) {
      misses++
      n = countMessage(m)
      remember(key, n)
    } else hits++
    byObject.set(m, n)
    return n
  }
  return {
    text,
    message,
    messages: (ms) => {
      let total = 0
      for (const m of ms) total += message(m)
      return total
    },
    stats: () => ({ hits, misses, size: byJson.size })
  }
}

/** Bytes (file data) are keyed by length only: a file part counts the same whatever it holds. */
const jsonSafe = (_key: string, value: unknown) =>
  value instanceof Uint8Array ? `bytes:${value.length}` : value instanceof URL ? value.href : value

const shared = makeCounter()

/** Tokens of messages with the shared counter. */
export const countMessages = (messages: ReadonlyArray<AnyMessage>): number => shared.messages(messages)

/**
 * Tokens of a whole request as a provider receives it (`Prompt.Prompt`, or its encoded form):
 * the system message and every other message.
 */
export const countPrompt = (prompt: Prompt.Prompt | Prompt.PromptEncoded): number =>
  shared.messages(prompt.content as ReadonlyArray<AnyMessage>)
