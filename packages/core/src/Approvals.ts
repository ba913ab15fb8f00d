/**
 * Whether a tool call may run: a mode, allow/deny rules, and a `Prompter` that asks a person.
 *
 * Modes: `read-only` (only `read` tools), `ask` (read runs, everything else asks), `auto-edit`
 * (read and write run, `exec`/`network` ask), `auto` (everything runs). Rules are checked before
 * the mode; a deny rule beats an allow rule. Rules have a scope: `once` (this call), `session`
 * (until the session ends), `project` (persisted through `persist`, e.g. `.muse/permissions.json`).
 *
 * What a rule's `pattern` matches depends on the call (see `docs/security.md`):
 * - a shell command (`Request.command`, e.g. `run_shell`): argv words of every simple command in
 *   it, after parsing (`Shell`); without a `Policy.shell` parser no pattern rule allows a command;
 * - a call that names workspace paths (`Request.paths`, e.g. `write_file`): each path, normalized;
 * - anything else: a glob over the one-line summary.
 *
 * Writes to protected paths (`.git/**`, `.muse/**`, `.claude/**`, at any depth) always ask, in
 * every mode; no rule and no "always" answer lets them through. So does a call that asks to run
 * outside the OS sandbox (`Request.unsandboxed`): only an answer with `unsandboxed: true` (the
 * person chose "run unsandboxed") lets it out, once; it is never stored as a rule.
 *
 * @example
 * ```ts
 * import { Approvals } from "@musekit/core"
 *
 * const policy = Approvals.layer({
 *   mode: "auto-edit",
 *   rules: [{ tool: "run_shell", pattern: "npm test*", action: "allow", scope: "project" }]
 *   // shell: ShellParser.parser (from @musekit/node) lets shell rules allow commands
 * })
 * ```
 */
import { Context, Effect, Layer, Schema } from "effect"
import * as Shell from "./Shell.js"
import type { EffectClass } from "./Tools.js"

export const Mode = Schema.Literal("read-only", "ask", "auto-edit", "auto")
export type Mode = typeof Mode.Type

export const Scope = Schema.Literal("once", "session", "project")
export type Scope = typeof Scope.Type

export const Rule = Schema.Struct({
  /** Tool name, or a glob like `mcp__*`, or `*`. */
  tool: Schema.String,
  /**
   * What the call must match; absent matches every call of the tool. For a shell command, argv
   * words (`npm test`, `npm test *`, `npm test*`); for a call with paths, a glob over each path;
   * else a glob over the call's one-line summary.
   */
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
  /** The shell command the call runs (tools that declare `command`): rules match its argv words. */
  readonly command?: string | undefined
  /** Workspace-relative paths the call names (normalized): rules match them; writes to protected ones ask. */
  readonly paths?: ReadonlyArray<string> | undefined
  /**
   * The rule that answering "yes, this session" / "yes, always" would store, shown to the person
   * before it is saved. Absent when no rule can be offered (the call cannot be reduced to one).
   */
  readonly proposal?: Rule | undefined
  /** Why the call is asked although a rule or the mode might let it run (risks, what a rule cannot cover). */
  readonly warnings?: ReadonlyArray<string> | undefined
  /**
   * The call asks to run outside the OS sandbox. It always asks (in every mode), no rule covers it,
   * and it runs outside only when the answer says `unsandboxed: true`.
   */
  readonly unsandboxed?: boolean | undefined
}

export interface Answer {
  readonly allow: boolean
  /** Remember the answer as a rule with this scope (`once` remembers nothing). */
  readonly scope: Scope
  readonly reason?: string | undefined
  /**
   * The exact rule the person confirmed for a `session`/`project` answer (normally
   * `request.proposal`). It is stored only if it matches the request; without it nothing is stored.
   */
  readonly rule?: Rule | undefined
  /**
   * "Run unsandboxed": the person lets a call that asked for it (`Request.unsandboxed`) run outside
   * the OS sandbox, this once. An allowing answer without it runs the call inside the sandbox.
   */
  readonly unsandboxed?: boolean | undefined
}

export interface Decision {
  readonly allow: boolean
  /** What decided: the mode, a rule, or a person's answer. */
  readonly by: "mode" | "rule" | "user"
  readonly mode: Mode
  readonly rule?: string | undefined
  readonly scope?: Scope | undefined
  readonly reason?: string | undefined
  /** The call runs outside the OS sandbox: a person answered "run unsandboxed". */
  readonly unsandboxed?: boolean | undefined
}

/** What a question shows besides the call: the rule a session/always answer stores, and warnings. */
export interface Proposal {
  readonly proposal?: Rule | undefined
  readonly warnings: ReadonlyArray<string>
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
  /** Record a person's answer (adds `answer.rule` for `session`/`project` scope when it matches the request). */
  readonly remember: (request: Request, answer: Answer) => Effect.Effect<Decision>
  /** The rule a session/always answer would store, and why the call is asked; shown with the question. */
  readonly propose?: ((request: Request) => Effect.Effect<Proposal>) | undefined
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

// ---------------------------------------------------------------------------------------------
// globs
// ---------------------------------------------------------------------------------------------

/** Glob match: `*` any run of characters, `?` one character; the whole string must match. */
const globs = new Map<string, RegExp>()

const globRe = (glob: string, any: string) =>
  new RegExp(
    `^${glob
      .split("")
      .map((c) => (c === "*" ? `${any}*` : c === "?" ? any : c.replace(/[.+^${}()|[\]\\]/g, "\\$&")))
      .join("")}$`
  )

export const globMatch = (glob: string, text: string): boolean => {
  let re = globs.get(glob)
  if (re) return re.test(text)
  re = globRe(glob, "[\\s\\S]")
  // rules are few and checked at every tool call; keep the map bounded all the same
  if (globs.size > 1000) globs.clear()
  globs.set(glob, re)
  return re.test(text)
}

/** Characters a wildcard of an allow rule never stands for: controls, line breaks, bidi overrides. */
const HIDING = "\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069"
const strictGlobs = new Map<string, RegExp>()

/**
 * Glob match for allow rules: like `globMatch`, but `*` and `?` never match control characters,
 * line breaks or bidi overrides, so a summary cannot hide a second line or reorder what is shown.
 */
export const globMatchStrict = (glob: string, text: string): boolean => {
  let re = strictGlobs.get(glob)
  if (!re) {
    re = globRe(glob, `[^${HIDING}]`)
    if (strictGlobs.size > 1000) strictGlobs.clear()
    strictGlobs.set(glob, re)
  }
  return re.test(text)
}

/** `text` as a glob that matches exactly it. */
export const literalGlob = (text: string): string | undefined =>
  /[*?]/.test(text) || new RegExp(`[${HIDING}]`).test(text) ? undefined : text

export const describeRule = (rule: Rule): string =>
  `${rule.action} ${rule.tool}${rule.pattern === undefined ? "" : ` "${rule.pattern}"`} (${rule.scope})`

// ---------------------------------------------------------------------------------------------
// protected paths
// ---------------------------------------------------------------------------------------------

/** Code points some file systems ignore in names (so `.g\u200cit` is `.git` there). */
const IGNORABLE = new RegExp(
  [
    "\\u00ad",
    "\\u034f",
    "\\u115f",
    "\\u1160",
    "\\u17b4",
    "\\u17b5",
    "[\\u180b-\\u180f]",
    "[\\u200b-\\u200f]",
    "[\\u202a-\\u202e]",
    "[\\u2060-\\u206f]",
    "\\u3164",
    "[\\ufe00-\\ufe0f]",
    "\\ufeff",
    "\\uffa0"
  ].join("|"),
  "g"
)

/** A path segment as a case-insensitive file system (HFS+, NTFS) would compare it. */
const canonicalSegment = (segment: string) =>
  segment
    .normalize("NFC")
    .replace(IGNORABLE, "")
    .toLowerCase()
    .replace(/[. ]+$/, "") // NTFS drops trailing dots and spaces
    .replace(/:.*$/, "") // NTFS alternate data streams (`.git::$INDEX_ALLOCATION`)

const PROTECTED: ReadonlyArray<{ readonly dir: string; readonly risk: (rest: string) => string }> = [
  {
    dir: ".git",
    risk: (rest) =>
      rest === "config" || rest.endsWith("/config")
        ? "git config can run commands (core.fsmonitor, core.hooksPath, aliases) at the next git call"
        : rest.startsWith("hooks") || rest.includes("/hooks")
          ? "git hooks run as commands at the next commit, checkout or merge"
          : rest === ""
            ? "a .git file points git at another repository"
            : "files under .git control what git runs and which repository it changes"
  },
  {
    dir: ".muse",
    risk: (rest) =>
      rest.startsWith("permissions")
        ? "muse's permission rules: a change can let commands run without asking"
        : "muse's project settings: a change can widen what muse runs without asking"
  },
  { dir: ".claude", risk: () => "agent settings and hooks: a change can run commands or widen permissions" }
]

/** The normalized form of a segment that names a protected directory (`git~1` is `.git` on NTFS). */
const protectedDir = (segment: string): string | undefined => {
  const c = canonicalSegment(segment)
  for (const p of PROTECTED) if (c === p.dir || c === `${p.dir.slice(1, 4)}~1`) return p.dir
  return undefined
}

/**
 * Why writing `path` (workspace-relative, normalized) is risky, or `undefined` when it is not a
 * protected path. Any segment naming `.git`, `.muse` or `.claude` counts (submodules and nested
 * repositories too), compared the way case-insensitive file systems compare names.
 */
export const protectedRisk = (path: string): string | undefined => {
  const segments = path.split("/")
  for (let i = 0; i < segments.length; i++) {
    const dir = protectedDir(segments[i]!)
    if (dir === undefined) continue
    const rest = segments.slice(i + 1).join("/")
    return `writes ${path}: ${PROTECTED.find((p) => p.dir === dir)!.risk(rest)}`
  }
  return undefined
}

/** Why a call that asks to run outside the sandbox is asked (shown with the question). */
export const UNSANDBOXED_WARNING =
  'runs outside the OS sandbox, with your full rights (files anywhere, your secrets, the network): only "run unsandboxed" lets it, this once'

/** The protected-path warnings of a request (only calls that change files: `write` and `exec`). */
export const protectedRisks = (request: Request): ReadonlyArray<string> =>
  request.effect === "write" || request.effect === "exec"
    ? (request.paths ?? []).map(protectedRisk).filter((r): r is string => r !== undefined)
    : []

// ---------------------------------------------------------------------------------------------
// deciding
// ---------------------------------------------------------------------------------------------

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
  /**
   * Parses shell commands for rules (`ShellParser.parser` from `@musekit/node`). Without one, no
   * pattern rule allows a shell command (it asks), and a command asks whenever a deny pattern could apply.
   */
  readonly shell?: Shell.Parser | undefined
}

/** A pattern written with the tool's name in front (`write_file src/*`) is read without it. */
const pathPattern = (rule: Rule, tool: string): string =>
  rule.pattern!.startsWith(`${tool} `) ? rule.pattern!.slice(tool.length + 1) : rule.pattern!

/** The analysis a request needs, computed once per command text. */
type Analyzed =
  | { readonly _tag: "none" }
  | { readonly _tag: "unparsed" }
  | { readonly _tag: "parsed"; readonly analysis: Shell.Analysis }

interface Assessment {
  readonly decision?: Decision | undefined
  readonly warnings: ReadonlyArray<string>
  readonly analyzed: Analyzed
}

export const make = (policy: Policy): Effect.Effect<Service> =>
  Effect.sync(() => {
    // plain variables: every tool call checks them, and every change happens on one fiber at a time
    let mode: Mode = policy.mode
    let rules: ReadonlyArray<Rule> = policy.rules ?? []
    const parser = policy.shell
    const analyses = new Map<string, Shell.Analysis>()

    const analyze = (request: Request): Effect.Effect<Analyzed> => {
      const command = request.command
      if (command === undefined) return Effect.succeed({ _tag: "none" })
      if (!parser) return Effect.succeed({ _tag: "unparsed" })
      const cached = analyses.get(command)
      if (cached) return Effect.succeed({ _tag: "parsed", analysis: cached })
      return Effect.map(Shell.analyze(parser, command), (analysis) => {
        if (analyses.size > 256) analyses.clear()
        analyses.set(command, analysis)
        return { _tag: "parsed", analysis } as const
      })
    }

    /** Does a deny rule's pattern match: yes, maybe (it cannot be known), no. */
    const denyMeets = (rule: Rule, request: Request, analyzed: Analyzed): "yes" | "maybe" | "no" => {
      if (rule.pattern === undefined) return "yes"
      switch (analyzed._tag) {
        case "unparsed":
          return "maybe"
        case "parsed": {
          const pattern = Shell.parsePattern(rule.pattern)
          let result: "yes" | "maybe" | "no" = analyzed.analysis.hidden.length > 0 ? "maybe" : "no"
          for (const c of analyzed.analysis.commands) {
            const m = Shell.meets(pattern, c)
            if (m === "yes") return "yes"
            if (m === "maybe") result = "maybe"
          }
          return result
        }
        case "none": {
          const paths = request.paths ?? []
          if (paths.length > 0) {
            const p = pathPattern(rule, request.tool)
            return paths.some((x) => globMatch(p, x)) ? "yes" : "no"
          }
          return globMatch(rule.pattern, request.summary) ? "yes" : "no"
        }
      }
    }

    /** The allow rules that together let the request run, or `undefined`. */
    const allowedBy = (
      candidates: ReadonlyArray<Rule>,
      request: Request,
      analyzed: Analyzed
    ): ReadonlyArray<Rule> | undefined => {
      const whole = candidates.find((r) => r.pattern === undefined)
      if (whole) return [whole]
      switch (analyzed._tag) {
        case "unparsed":
          return undefined
        case "parsed": {
          const a = analyzed.analysis
          if (a.uncovered.length > 0) return undefined
          const used: Array<Rule> = []
          for (const c of a.commands) {
            if (!c.mustAllow) continue
            const r = candidates.find((r) => Shell.covers(Shell.parsePattern(r.pattern!), c))
            if (!r) return undefined
            if (!used.includes(r)) used.push(r)
          }
          return used.length > 0 ? used : undefined
        }
        case "none": {
          const paths = request.paths ?? []
          if (paths.length > 0) {
            const used: Array<Rule> = []
            for (const x of paths) {
              const r = candidates.find((r) => globMatchStrict(pathPattern(r, request.tool), x))
              if (!r) return undefined
              if (!used.includes(r)) used.push(r)
            }
            return used
          }
          const r = candidates.find((r) => globMatchStrict(r.pattern!, request.summary))
          return r ? [r] : undefined
        }
      }
    }

    /**
     * Decide what can be decided without a person. A command is parsed only when a pattern rule
     * for its tool exists or a proposal is wanted: in `auto` mode without rules nothing is parsed.
     */
    const assess = (request: Request, proposing: boolean): Effect.Effect<Assessment> =>
      Effect.suspend(() => {
        const parse = proposing || rules.some((r) => r.pattern !== undefined && globMatch(r.tool, request.tool))
        return parse
          ? analyze(request)
          : Effect.succeed<Analyzed>({ _tag: request.command === undefined ? "none" : "unparsed" })
      }).pipe(
        Effect.map((analyzed): Assessment => {
          const m = mode
          const mine = rules.filter((r) => globMatch(r.tool, request.tool))
          const warnings: Array<string> = []
          let maybeDenied: Rule | undefined
          for (const r of mine) {
            if (r.action !== "deny") continue
            const meet = denyMeets(r, request, analyzed)
            if (meet === "yes") {
              return {
                decision: { allow: false, by: "rule", mode: m, rule: describeRule(r), scope: r.scope },
                warnings,
                analyzed
              }
            }
            if (meet === "maybe") maybeDenied ??= r
          }
          if (analyzed._tag === "parsed" && analyzed.analysis.uncovered.length > 0) {
            warnings.push(...analyzed.analysis.uncovered.map((u) => `no rule covers ${u}`))
          }
          if (analyzed._tag === "unparsed" && mine.some((r) => r.pattern !== undefined)) {
            warnings.push("no shell parser is available, so rules cannot be checked against this command")
          }
          if (maybeDenied) {
            warnings.push(
              `the ${describeRule(maybeDenied)} rule might apply to a part of the command that cannot be checked`
            )
          }
          const byMode = modeAllows(m, request.effect)
          if (byMode === false) {
            return {
              decision: {
                allow: false,
                by: "mode",
                mode: m,
                reason: `${request.tool} is a ${request.effect} tool and the mode is ${m}`
              },
              warnings,
              analyzed
            }
          }
          // a deny rule that might apply: a person decides, never a rule or the mode
          if (maybeDenied) return { warnings, analyzed }
          const risks = protectedRisks(request)
          if (risks.length > 0) return { warnings: [...risks, ...warnings], analyzed }
          if (request.unsandboxed) return { warnings: [UNSANDBOXED_WARNING, ...warnings], analyzed }
          const used = allowedBy(
            mine.filter((r) => r.action === "allow"),
            request,
            analyzed
          )
          if (used) {
            return {
              decision: {
                allow: true,
                by: "rule",
                mode: m,
                rule: used.map(describeRule).join("; "),
                scope: used[0]!.scope
              },
              warnings,
              analyzed
            }
          }
          if (byMode === true) return { decision: { allow: true, by: "mode", mode: m }, warnings, analyzed }
          return { warnings, analyzed }
        })
      )

    /** The rule a session/always answer would store for `request`, if one can be offered. */
    const proposalFor = (request: Request, analyzed: Analyzed): Rule | undefined => {
      if (protectedRisks(request).length > 0 || request.unsandboxed) return undefined
      const rule = (pattern: string | undefined): Rule | undefined =>
        pattern === undefined ? undefined : { tool: request.tool, pattern, action: "allow", scope: "session" }
      switch (analyzed._tag) {
        case "unparsed":
          return undefined
        case "parsed":
          return rule(Shell.propose(analyzed.analysis))
        case "none": {
          const paths = request.paths ?? []
          if (paths.length > 0) return paths.length === 1 ? rule(literalGlob(paths[0]!)) : undefined
          return rule(literalGlob(request.summary))
        }
      }
    }

    /** Whether `rule` (the person's answer) matches `request`: it would decide it the way the person did. */
    const fits = (rule: Rule, request: Request, allow: boolean, analyzed: Analyzed): boolean => {
      if (rule.tool !== request.tool || rule.action !== (allow ? "allow" : "deny")) return false
      if (rule.pattern === undefined) return true
      return allow ? allowedBy([rule], request, analyzed) !== undefined : denyMeets(rule, request, analyzed) === "yes"
    }

    const service: Service = {
      check: (request) => Effect.map(assess(request, false), (a) => a.decision),
      propose: (request) =>
        Effect.map(assess(request, true), (a) => ({
          proposal: proposalFor(request, a.analyzed),
          warnings: a.warnings
        })),
      remember: (request, answer) =>
        Effect.gen(function* () {
          const m = mode
          const rule = answer.rule
          if (
            answer.scope !== "once" &&
            rule !== undefined &&
            !request.unsandboxed &&
            protectedRisks(request).length === 0
          ) {
            const analyzed = yield* analyze(request)
            if (fits(rule, request, answer.allow, analyzed)) {
              const stored: Rule = { ...rule, scope: answer.scope }
              rules = [...rules, stored]
              if (answer.scope === "project" && policy.persist) yield* policy.persist(stored)
            }
          }
          const out = answer.allow && request.unsandboxed === true && answer.unsandboxed === true
          return {
            allow: answer.allow,
            by: "user",
            mode: m,
            // an answer about running outside the sandbox is never remembered beyond this call
            scope: request.unsandboxed ? "once" : answer.scope,
            reason: answer.reason,
            ...(out ? { unsandboxed: true } : {})
          } as Decision
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
