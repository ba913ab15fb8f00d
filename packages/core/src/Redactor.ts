/**
 * Redaction of secrets before anything reaches the event log (invariant 7).
 *
 * A redactor replaces known secret values (API keys, tokens from the environment) and strings that
 * look like well-known credential formats with `[REDACTED]` markers. It works on serialized JSON.
 *
 * @example
 * ```ts
 * import { Redactor } from "@musekit/core"
 *
 * const r = Redactor.make({ secrets: { OPENAI_API_KEY: "sk-live-123456789" } })
 * r.redact('{"out":"key=sk-live-123456789"}') // '{"out":"key=[REDACTED:OPENAI_API_KEY]"}'
 * ```
 */

export interface Redactor {
  readonly redact: (json: string) => string
}

/** Credential shapes redacted even when the value is not a known environment secret. */
export const patterns: ReadonlyArray<RegExp> = [
  /sk-ant-[A-Za-z0-9_-]{20,}/g,
  /sk-(?:proj-)?[A-Za-z0-9_-]{20,}/g,
  /gh[pousr]_[A-Za-z0-9]{30,}/g,
  /github_pat_[A-Za-z0-9_]{30,}/g,
  /AIza[0-9A-Za-z_-]{35}/g,
  /xox[abprs]-[A-Za-z0-9-]{10,}/g,
  /AKIA[0-9A-Z]{16}/g
]

/** Environment variable names whose values are treated as secrets. */
export const secretName = /(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|AUTH)/i

export const none: Redactor = { redact: (json) => json }

const escapeForJson = (s: string) => JSON.stringify(s).slice(1, -1)

/**
 * Checks of the tokens of canonical JSON one at a time, for a redactor whose finds cannot span two
 * tokens (see `isClean`). Walks that visit the strings and numbers of a value anyway (`Recorder`
 * compares a produced event with the recorded one) use them directly.
 */
export interface TokenChecks {
  /** Whether a string (a key or a value) holds nothing to redact, as JSON writes it. */
  readonly string: (s: string) => boolean
  /** Whether a finite number holds nothing to redact, as JSON writes it. */
  readonly number: (n: number) => boolean
}

const nothingToCheck: TokenChecks = { string: () => true, number: () => true }

const checksOf = new WeakMap<Redactor, TokenChecks>()

/** The token checks of `redactor`; `undefined` when it cannot be checked token by token. */
export const tokenChecks = (redactor: Redactor): TokenChecks | undefined =>
  redactor === none ? nothingToCheck : checksOf.get(redactor)

/** Numbers and short strings found clean are remembered (they recur in every event), up to this many each. */
const CLEAN_NUMBERS = 4_096

/** Strings up to this length are remembered when found clean. */
const SHORT_STRING = 48

/** A pattern that begins with a required literal that no escape sequence contains after its `\`. */
const STARTS_OUTSIDE_ESCAPES = /^[A-Zg-mo-qsv-z_-][^?*{]/

const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

const makeChecks = (secrets: ReadonlyArray<string>, pattern: RegExp, escapesHarmless: boolean): TokenChecks => {
  // With no secrets, and no credential shape that can begin inside an escape sequence (`\n`,
  // `\u001f`, …), a string holds a match as JSON writes it exactly when it holds one as it is.
  const test =
    escapesHarmless && secrets.length === 0
      ? (s: string) => !pattern.test(s)
      : (s: string) => {
          const text = NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : s
          if (pattern.test(text)) return false
          for (const secret of secrets) if (text.includes(secret)) return false
          return true
        }
  // short strings found clean are remembered too (keys and names recur in every event)
  const cleanShort = new Set<string>()
  const string = (s: string) => {
    if (s.length > SHORT_STRING) return test(s)
    if (cleanShort.has(s)) return true
    if (!test(s)) return false
    if (cleanShort.size >= CLEAN_NUMBERS) cleanShort.clear()
    cleanShort.add(s)
    return true
  }
  const clean = new Set<number>()
  const number = (n: number) => {
    if (clean.has(n)) return true
    if (!string(String(n))) return false
    if (clean.size >= CLEAN_NUMBERS) clean.clear()
    clean.add(n)
    return true
  }
  return { string, number }
}

/**
 * A credential shape whose matches can only consist of `[A-Za-z0-9_-]`: literal characters of that
 * set, classes of them (ranges within one of A-Z, a-z, 0-9), quantifiers and `(?:…)` groups.
 */
const WORDY_PATTERN =
  /^(?:[A-Za-z0-9_-]|\[(?:[A-Z]-[A-Z]|[a-z]-[a-z]|[0-9]-[0-9]|[A-Za-z0-9_]|-(?=\]))+\]|\{\d+(?:,\d*)?\}|[?*+|)]|\(\?:)+$/

/** Characters that can stand next to a token of canonical JSON (or start an escape). */
const STRUCTURAL = /["\\,:{}[\]]/

/**
 * Build a redactor from named secret values (values shorter than 8 characters are ignored: they
 * would match ordinary text) plus the built-in credential patterns.
 */
export const make = (options: { readonly secrets?: Readonly<Record<string, string | undefined>> } = {}): Redactor => {
  const secrets = Object.entries(options.secrets ?? {})
    .filter((e): e is [string, string] => typeof e[1] === "string" && e[1].length >= 8)
    .map(([name, value]) => [name, escapeForJson(value)] as const)
    .sort((a, b) => b[1].length - a[1].length)
  // one pass for every credential shape
  const any = new RegExp(patterns.map((p) => p.source).join("|"), "g")
  const redactor: Redactor = {
    redact: (json) => {
      let out = json
      for (const [name, value] of secrets) {
        if (out.includes(value)) out = out.split(value).join(`[REDACTED:${name}]`)
      }
      any.lastIndex = 0
      if (any.test(out)) {
        any.lastIndex = 0
        out = out.replace(any, "[REDACTED]")
      }
      return out
    }
  }
  // `isClean` can look at a value token by token when nothing this redactor finds can span two
  // tokens of the JSON text (see there); otherwise it always answers "not known".
  const pattern = new RegExp(any.source)
  if (
    patterns.every((p) => WORDY_PATTERN.test(p.source) && p.flags.replace("g", "") === "") &&
    !["null", "true", "false"].some((literal) => pattern.test(literal)) &&
    secrets.every(([, value]) => !STRUCTURAL.test(value))
  ) {
    const escapesHarmless = patterns.every((p) => STARTS_OUTSIDE_ESCAPES.test(p.source) && !p.source.includes("|"))
    checksOf.set(
      redactor,
      makeChecks(
        secrets.map(([, value]) => value),
        pattern,
        escapesHarmless
      )
    )
  }
  return redactor
}

/** Nesting deeper than this is left to `redact` (and a cycle to the serializer, which throws). */
const MAX_DEPTH = 64

/**
 * Whether `redactor.redact(Event.canonicalJson(value))` is certain to return the JSON unchanged,
 * decided from the strings and numbers of `value` without serializing it. `false` means "not
 * known": something to redact, a value that is not plain JSON data (strings, numbers, booleans,
 * null, arrays, plain objects), or a redactor not made by `make`.
 *
 * Sound because every credential shape matches only characters of `[A-Za-z0-9_-]` (and none of
 * `null`, `true`, `false`), and no secret contains a quote, a backslash or a JSON punctuation
 * character: a match in the JSON text then lies within one string (as escaped) or one number,
 * which are checked one by one. `make` checks these conditions and leaves `isClean` to answer
 * "not known" when they do not hold.
 */
export const isClean = (redactor: Redactor, value: unknown): boolean => {
  const checks = tokenChecks(redactor)
  return checks !== undefined && cleanValue(checks, value, 0)
}

const cleanValue = (checks: TokenChecks, v: unknown, depth: number): boolean => {
  switch (typeof v) {
    case "string":
      return checks.string(v)
    case "number":
      // written as `String(v)`, or `null` when not finite
      return !Number.isFinite(v) || checks.number(v)
    case "boolean":
    case "undefined":
      return true
    case "object": {
      if (v === null) return true
      if (depth >= MAX_DEPTH || (v as { toJSON?: unknown }).toJSON !== undefined) return false
      const proto = Object.getPrototypeOf(v)
      if (proto === Array.prototype) {
        const a = v as ReadonlyArray<unknown>
        for (let i = 0; i < a.length; i++) if (!cleanValue(checks, a[i], depth + 1)) return false
        return true
      }
      if (proto !== Object.prototype && proto !== null) return false
      const o = v as Record<string, unknown>
      // `for in` also visits inherited enumerable keys, which JSON leaves out: checking more is safe
      for (const k in o) {
        const x = o[k]
        if (x === undefined) continue
        if (!checks.string(k) || !cleanValue(checks, x, depth + 1)) return false
      }
      return true
    }
    default:
      // bigints, functions, symbols
      return false
  }
}

/** The secrets of an environment map: every variable whose name looks like a credential. */
export const secretsFromEnv = (env: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(env)) if (v && secretName.test(k)) out[k] = v
  return out
}

/** Bytes as a string of one character per byte (0–255), so a redaction keeps every other byte as it was. */
const bytesToChars = (bytes: Uint8Array): string => {
  let out = ""
  for (let i = 0; i < bytes.length; i += 8192) {
    out += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192) as unknown as Array<number>)
  }
  return out
}

const charsToBytes = (chars: string): Uint8Array => {
  const out = new Uint8Array(chars.length)
  for (let i = 0; i < chars.length; i++) out[i] = chars.charCodeAt(i)
  return out
}

/**
 * `bytes` with what `redactor` finds replaced, every other byte kept: for payloads stored outside the
 * log (text in any encoding, or binary). Returns `bytes` itself when there is nothing to redact.
 * Secrets and credential shapes are ASCII, so they are found byte for byte whatever the encoding.
 */
export const redactBytes = (redactor: Redactor, bytes: Uint8Array): Uint8Array => {
  if (redactor === none || bytes.length === 0) return bytes
  const json = JSON.stringify(bytesToChars(bytes))
  const redacted = redactor.redact(json)
  if (redacted === json) return bytes
  let chars: unknown
  try {
    chars = JSON.parse(redacted)
  } catch {
    chars = undefined
  }
  // a secret matched across an escape sequence: keep what JSON shows, which holds no secret either
  return charsToBytes(typeof chars === "string" ? chars : redacted.slice(1, -1))
}
