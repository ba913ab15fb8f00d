/**
 * Whether a tool call may run: a mode, allow/deny rules, and a `Prompter` that asks a person.
 *
 * Modes: `read-only` (only `read` tools), `ask` (read runs, everything else asks), `auto-edit`
 * (read and write run, `exec`/`network` ask), `auto` (everything runs). Rules are checked before
 * the mode; a deny rule beats an allow rule. Rules have a scope: `once` (this call), `session`
 * (until the session ends), `project` (persisted through `persist`, e.g. `.muse/permissions.json`).
 *
 * @example
 * ```ts
 * import { Approvals } from "@musekit/core"
 *
 * const policy = Approvals.layer({
 *   mode: "auto-edit",
 *   rules: [{ tool: "run_shell", pattern: "npm test*", action: "allow", scope: "project" }]
 * })
 * ```
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { EffectClass } from "./Tools.js"

export const Mode = Schema.Literal("read-only", "ask", "auto-edit", "auto")
export type Mode = typeof Mode.Type

export const Scope = Schema.Literal("once", "session", "project")
export type Scope = typeof Scope.Type

export const Rule = Schema.Struct({
  /** Tool name, or a glob like `mcp__*`, or `*`. */
  tool: Schema.String,
  /** Glob over the call's one-line summary (e.g. the shell command); absent matches every call. */
  pattern: Schema.optional(Schema.String),
  action: Schema.Literal("allow", "deny"),
  scope: Schema.optionalWith(Scope, { default: () => "session" as const })
})
export type Rule = typeof Rule.Type

export interface Request {
  readonly agent: string
  readonly tool: string
  readonly effect: EffectClass
  readonly summary: string
  readonly preview?: string | undefined
  /**
   * The rule that answering "yes, this session" / "yes, always" would store, shown to the person
   * before it is saved. Absent when no rule can be offered (the call cannot be reduced to one).
   */
  readonly proposal?: Rule | undefined
}

export interface Answer {
  readonly allow: boolean
  /** Remember the answer as a rule with this scope (`once` remembers nothing). */
  readonly scope: Scope
  readonly reason?: string | undefined
  /** The exact rule the person confirmed for a `session`/`project` answer (normally `request.proposal`). */
  readonly rule?: Rule | undefined
}

export interface Decision {
  readonly allow: boolean
  /** What decided: the mode, a rule, or a person's answer. */
  readonly by: "mode" | "rule" | "user"
  readonly mode: Mode
  readonly rule?: string | undefined
  readonly scope?: Scope | undefined
  readonly reason?: string | undefined
}

/** Asks a person (terminal, SDK callback, test) about a tool call. */
export interface PrompterService {
  readonly ask: (request: Request) => Effect.Effect<Answer>
}

export class Prompter extends Context.Tag("@musekit/core/Prompter")<Prompter, PrompterService>() {}

/** A prompter that always gives the same answer (tests, headless runs). */
export const layerPrompterConstant = (answer: Answer): Layer.Layer<Prompter> =>
  Layer.succeed(Prompter, { ask: () => Effect.succeed(answer) })

/** A prompter for headless runs: denies anything that would need a person. */
export const layerPrompterDeny: Layer.Layer<Prompter> = layerPrompterConstant({
  allow: false,
  scope: "once",
  reason: "no one to ask (headless run); allow it with a rule or a more permissive mode"
})

export interface Service {
  /** Decide without asking; `undefined` means a person must be asked. */
  readonly check: (request: Request) => Effect.Effect<Decision | undefined>
  /** Record a person's answer (adds a rule for `session`/`project` scope). */
  readonly remember: (request: Request, answer: Answer) => Effect.Effect<Decision>
  readonly mode: Effect.Effect<Mode>
  readonly setMode: (mode: Mode) => Effect.Effect<void>
  readonly rules: Effect.Effect<ReadonlyArray<Rule>>
  /** The mode and rules as they are now, for checkpoints. A service without it turns checkpoints off. */
  readonly checkpoint?:
    | {
        readonly save: Effect.Effect<unknown>
        readonly restore: (state: unknown) => Effect.Effect<void>
      }
    | undefined
}

export class Approvals extends Context.Tag("@musekit/core/Approvals")<Approvals, Service>() {}

/** Glob match: `*` any run of characters, `?` one character; the whole string must match. */
const globs = new Map<string, RegExp>()

export const globMatch = (glob: string, text: string): boolean => {
  let re = globs.get(glob)
  if (re) return re.test(text)
  re = new RegExp(
    `^${glob
      .split("")
      .map((c) => (c === "*" ? "[\\s\\S]*" : c === "?" ? "[\\s\\S]" : c.replace(/[.+^${}()|[\]\\]/g, "\\$&")))
      .join("")}$`
  )
  // rules are few and checked at every tool call; a pattern is a call summary, so keep the map bounded
  if (globs.size > 1000) globs.clear()
  globs.set(glob, re)
  return re.test(text)
}

export const ruleMatches = (rule: Rule, request: Request): boolean =>
  globMatch(rule.tool, request.tool) && (rule.pattern === undefined || globMatch(rule.pattern, request.summary))

export const describeRule = (rule: Rule): string =>
  `${rule.action} ${rule.tool}${rule.pattern === undefined ? "" : ` "${rule.pattern}"`} (${rule.scope})`

const modeAllows = (mode: Mode, effect: EffectClass): boolean | undefined => {
  switch (mode) {
    case "auto":
      return true
    case "auto-edit":
      return effect === "read" || effect === "write" ? true : undefined
    case "ask":
      return effect === "read" ? true : undefined
    case "read-only":
      return effect === "read"
  }
}

export interface Policy {
  readonly mode: Mode
  readonly rules?: ReadonlyArray<Rule> | undefined
  /** Persist a project-scoped rule (the Node layer writes `.muse/permissions.json`). */
  readonly persist?: ((rule: Rule) => Effect.Effect<void>) | undefined
}

export const make = (policy: Policy): Effect.Effect<Service> =>
  Effect.sync(() => {
    // plain variables: every tool call checks them, and every change happens on one fiber at a time
    let mode: Mode = policy.mode
    let rules: ReadonlyArray<Rule> = policy.rules ?? []
    const decide = (request: Request): Decision | undefined => {
      const m = mode
      const deny = rules.find((r) => r.action === "deny" && ruleMatches(r, request))
      if (deny) return { allow: false, by: "rule", mode: m, rule: describeRule(deny), scope: deny.scope } as Decision
      const byMode = modeAllows(m, request.effect)
      if (byMode === false) {
        return {
          allow: false,
          by: "mode",
          mode: m,
          reason: `${request.tool} is a ${request.effect} tool and the mode is ${m}`
        } as Decision
      }
      const allow = rules.find((r) => r.action === "allow" && ruleMatches(r, request))
      if (allow) return { allow: true, by: "rule", mode: m, rule: describeRule(allow), scope: allow.scope } as Decision
      if (byMode === true) return { allow: true, by: "mode", mode: m } as Decision
      return undefined
    }
    const service: Service = {
      check: (request) => Effect.sync(() => decide(request)),
      remember: (request, answer) =>
        Effect.gen(function* () {
          const m = mode
          if (answer.scope !== "once") {
            const rule: Rule = {
              tool: request.tool,
              pattern: request.summary,
              action: answer.allow ? "allow" : "deny",
              scope: answer.scope
            }
            rules = [...rules, rule]
            if (answer.scope === "project" && policy.persist) yield* policy.persist(rule)
          }
          return { allow: answer.allow, by: "user", mode: m, scope: answer.scope, reason: answer.reason } as Decision
        }),
      mode: Effect.sync(() => mode),
      setMode: (m) =>
        Effect.sync(() => {
          mode = m
        }),
      rules: Effect.sync(() => rules),
      checkpoint: {
        save: Effect.sync(() => ({ mode, rules })),
        restore: (state) =>
          Effect.sync(() => {
            const st = state as { mode: Mode; rules: ReadonlyArray<Rule> }
            mode = st.mode
            rules = st.rules
          })
      }
    }
    return service
  })

export const layer = (policy: Policy): Layer.Layer<Approvals> => Layer.effect(Approvals, make(policy))

/** Everything runs (tests). */
export const layerAutoApprove: Layer.Layer<Approvals> = layer({ mode: "auto" })
