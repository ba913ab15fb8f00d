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
  return {
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
}

/** The secrets of an environment map: every variable whose name looks like a credential. */
export const secretsFromEnv = (env: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(env)) if (v && secretName.test(k)) out[k] = v
  return out
}
