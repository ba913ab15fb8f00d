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
 * A `Counter` caches the count of each message by object identity and the count of each text in
 * it by value (or by a hash for long texts), and remembers the last list of messages it counted,
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
import { countTokens } from "gpt-tokenizer"

/** Tokens added per message for its role and framing (as in OpenAI's chat format). */
export const MESSAGE_OVERHEAD = 4

/** Tokens added per tool call or tool result part for its framing. */
export const PART_OVERHEAD = 3

/** Estimate for one file part (an image or document); providers bill these differently. */
export const FILE_TOKENS = 1_000

/** Length of the slices long text is counted in. */
export const SLICE_CHARS = 1_000

const noSpecial = { disallowedSpecial: new Set<string>() }

const countSlice = (text: string): number => countTokens(text, noSpecial)

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

/**
 * An upper bound of `countText(text)` found without tokenizing: every token stands for at least
 * one byte of UTF-8, and a UTF-16 unit is at most 3 bytes (a lone surrogate, which a slice cut may
 * leave, is encoded as U+FFFD). Where the bound is within a budget, counting is not needed.
 */
export const upperBound = (text: string): number => {
  let bytes = text.length
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0x80) bytes += c < 0x800 ? 1 : 2
  }
  return bytes
}

/** The text a tool output is shown to the model as: a string as is, anything else as JSON. */
export const outputText = (value: unknown): string =>
  typeof value === "string" ? value : (JSON.stringify(value ?? null) ?? "null")

/** A message of a prompt, encoded (history) or decoded (`Prompt.Message`): both count the same. */
export type AnyMessage = Prompt.MessageEncoded | Prompt.Message

const countPart = (part: any, count: (text: string) => number): number => {
  switch (part?.type) {
    case "text":
    case "reasoning":
      return count(String(part.text ?? ""))
    case "tool-call":
      return PART_OVERHEAD + count(String(part.name)) + count(outputText(part.params))
    case "tool-result":
      return PART_OVERHEAD + count(String(part.name)) + count(outputText(part.result))
    case "file":
      return FILE_TOKENS
    default:
      return 0
  }
}

const countMessageWith = (message: AnyMessage, count: (text: string) => number): number => {
  const content = (message as { content: unknown }).content
  if (typeof content === "string") return MESSAGE_OVERHEAD + count(content)
  let total = MESSAGE_OVERHEAD
  if (Array.isArray(content)) for (const p of content) total += countPart(p, count)
  return total
}

/** Tokens of one message, uncached. */
export const countMessage = (message: AnyMessage): number => countMessageWith(message, countText)

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

/** Texts up to this long are cached by value, longer ones by length and hash. */
const SHORT_TEXT_CHARS = 256

/**
 * A counter with a bounded cache (`maxEntries` short and `maxEntries` long text counts, oldest
 * evicted first; message counts are kept by object as long as the message lives).
 */
export const makeCounter = (options: { readonly maxEntries?: number | undefined } = {}): Counter => {
  const maxEntries = options.maxEntries ?? 20_000
  const byObject = new WeakMap<object, number>()
  // two maps, so that a short text can never be taken for the key of a long one
  const byText = new Map<string, number>()
  const byHash = new Map<string, number>()
  let hits = 0
  let misses = 0
  // texts tokenized so far: a message is a miss when counting it tokenized anything
  let tokenized = 0
  const remember = (map: Map<string, number>, key: string, n: number) => {
    map.set(key, n)
    if (map.size > maxEntries) map.delete(map.keys().next().value!)
  }
  // the long texts seen last (a system prompt, the summary prompt: counted at every request), by
  // the string itself: a lookup of the same string costs nothing, where hashing it costs its length
  const recentLong = new Map<string, number>()
  const cached = (t: string): number => {
    if (t.length > SHORT_TEXT_CHARS) {
      const recent = recentLong.get(t)
      if (recent !== undefined) return recent
    }
    const map = t.length <= SHORT_TEXT_CHARS ? byText : byHash
    const key = map === byText ? t : `${t.length}:${Model.hash53(t)}`
    let n = map.get(key)
    if (n === undefined) {
      tokenized++
      n = countText(t)
      remember(map, key, n)
    }
    if (t.length > SHORT_TEXT_CHARS) {
      recentLong.set(t, n)
      if (recentLong.size > 64) recentLong.delete(recentLong.keys().next().value!)
    }
    return n
  }
  const text = (t: string) => {
    const before = tokenized
    const n = cached(t)
    if (tokenized === before) hits++
    else misses++
    return n
  }
  // Counted part by part, each text through the cache: an equal message (another object, e.g.
  // the decoded prompt a provider receives) costs lookups only, and so does a new message made of
  // texts seen before (a tool name, an output read twice).
  const message = (m: AnyMessage) => {
    const known = byObject.get(m)
    if (known !== undefined) {
      hits++
      return known
    }
    const before = tokenized
    const n = countMessageWith(m, cached)
    if (tokenized === before) hits++
    else misses++
    byObject.set(m, n)
    return n
  }
  // The history an agent sends grows at its end from one model call to the next: the last list
  // counted that starts with the same message is kept with its running totals, so a list that
  // shares its beginning costs an identity check per shared message and a count per new one.
  const lists = new WeakMap<object, { readonly messages: Array<AnyMessage>; readonly totals: Array<number> }>()
  const messages = (ms: ReadonlyArray<AnyMessage>) => {
    const first = ms[0]
    if (first === undefined) return 0
    let known = lists.get(first)
    if (!known) lists.set(first, (known = { messages: [], totals: [] }))
    const shared = Math.min(known.messages.length, ms.length)
    let k = 0
    while (k < shared && known.messages[k] === ms[k]) k++
    known.messages.length = k
    known.totals.length = k
    let total = k > 0 ? known.totals[k - 1]! : 0
    for (let i = k; i < ms.length; i++) {
      const m = ms[i]!
      total += message(m)
      known.messages.push(m)
      known.totals.push(total)
    }
    return total
  }
  return {
    text,
    message,
    messages,
    stats: () => ({ hits, misses, size: byText.size + byHash.size })
  }
}

const shared = makeCounter()

/** Tokens of messages with the shared counter. */
export const countMessages = (messages: ReadonlyArray<AnyMessage>): number => shared.messages(messages)

/**
 * Tokens of a whole request as a provider receives it (`Prompt.Prompt`, or its encoded form):
 * the system message and every other message.
 */
export const countPrompt = (prompt: Prompt.Prompt | Prompt.PromptEncoded): number =>
  shared.messages(prompt.content as ReadonlyArray<AnyMessage>)
