/**
 * Events as lines a person reads: the transcript of `muse replay`, the progress of `muse run` and
 * the scrollback of the interactive UI all come from here. Every piece of text taken from an event
 * (model text, commands, paths, diffs, tool output, reasons) goes through `escapeUnsafe` or
 * `escapeOutput` before it is styled, so recorded text cannot act on the terminal.
 *
 * @example
 * ```ts
 * import { plain } from "./ansi.js"
 * import * as Render from "./render.js"
 *
 * Render.toolTitle("run_shell", "npm test\nrm -rf ~", plain) // "$ npm test\\nrm -rf ~"
 * ```
 */
import type { Event } from "@musekit/core"
import { escapeOutput, escapeUnsafe, type Style, truncate, width, wrap } from "./ansi.js"
import * as ModelInfo from "./modelInfo.js"

export interface Options {
  readonly style: Style
  /** Columns available (lines are wrapped to one less). */
  readonly columns: number
  /** Show model text of the main agent (false when it was streamed already). */
  readonly mainText: boolean
  /** Longest diff shown, in lines. */
  readonly maxDiffLines?: number | undefined
  /** Show approvals and inputs (a transcript does; the live UI asks instead). */
  readonly transcript: boolean
}

const d = (e: Event.Envelope): any => (typeof e.data === "object" && e.data !== null ? e.data : {})

/** The first non-blank line of a value, cut to `max` characters and escaped. */
const firstLine = (s: unknown, max: number, style: Style): string => {
  const t = typeof s === "string" ? s : s === undefined || s === null ? "" : JSON.stringify(s)
  const lines = t.split("\n")
  const line = lines.find((l) => l.trim() !== "") ?? ""
  return escapeUnsafe(line.length > max ? `${line.slice(0, max - 1)}…` : line, style)
}

/** Thousands separators (without Intl, whose first use costs tens of milliseconds). */
export const fmtInt = (n: number): string => {
  const r = Math.round(n)
  const digits = String(Math.abs(r))
  let out = ""
  for (let i = 0; i < digits.length; i++) {
    if (i > 0 && (digits.length - i) % 3 === 0) out += ","
    out += digits[i]
  }
  return r < 0 ? `-${out}` : out
}

export const fmtCost = (usd: number | undefined): string =>
  usd === undefined ? "" : usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`

export const fmtDuration = (ms: number): string =>
  ms < 1000
    ? `${Math.round(ms)}ms`
    : ms < 60_000
      ? `${(ms / 1000).toFixed(1)}s`
      : `${Math.floor(ms / 60_000)}m${String(Math.floor((ms % 60_000) / 1000)).padStart(2, "0")}s`

/** Colored unified diff, cut to `max` lines (the cut is said). Every line is escaped. */
export const diffLines = (diff: string, style: Style, max = 60): Array<string> => {
  const lines = diff.replace(/\n$/, "").split("\n")
  const shown = lines
    .slice(0, max)
    .map((raw) => [raw, escapeUnsafe(raw, style, { tabs: "spaces" })] as const)
    .map(([raw, l]) =>
      raw.startsWith("+++") || raw.startsWith("---")
        ? style.bold(l)
        : raw.startsWith("@@")
          ? style.cyan(l)
          : raw.startsWith("+")
            ? style.green(l)
            : raw.startsWith("-")
              ? style.red(l)
              : style.dim(l)
    )
  if (lines.length > max) shown.push(style.dim(`… ${lines.length - max} more diff lines`))
  return shown
}

export const diffStat = (diff: string): { readonly added: number; readonly removed: number } => {
  let added = 0
  let removed = 0
  for (const l of diff.split("\n")) {
    if (l.startsWith("+++") || l.startsWith("---")) continue
    if (l.startsWith("+")) added++
    else if (l.startsWith("-")) removed++
  }
  return { added, removed }
}

/** Longest tool title shown in one line; a longer one says how much more there is. */
const TITLE_MAX = 2000

/**
 * The one-line title of a tool call: the whole command of `run_shell` (its line breaks shown as
 * `\n`), or the call's summary; escaped, cut only past 2,000 characters (saying how many more).
 */
export const toolTitle = (tool: string, summary: unknown, style: Style): string => {
  const raw = typeof summary === "string" ? summary : ""
  const cut = raw.length > TITLE_MAX ? raw.slice(0, TITLE_MAX) : raw
  const more = raw.length > TITLE_MAX ? style.dim(` … +${fmtInt(raw.length - TITLE_MAX)} more characters`) : ""
  const s = escapeUnsafe(cut, style) + more
  const name = escapeUnsafe(tool, style)
  if (tool === "run_shell") return `$ ${s}`
  if (raw.startsWith(tool)) return s
  return raw ? `${name} ${s}` : name
}

/**
 * A command shown over as many lines as it has, each escaped: `$ ` before the first, `> ` before
 * the others (as a shell shows a continued command).
 */
export const commandLines = (command: string, style: Style): Array<string> =>
  command
    .replace(/\n$/, "")
    .split("\n")
    .map((l, i) => `${style.dim(i === 0 ? "$" : ">")} ${escapeUnsafe(l, style)}`)

const agentTag = (agent: string, style: Style) =>
  agent === "main" ? "" : `${style.magenta(escapeUnsafe(agent, style))} `

/** What a tool result says, in a few lines. */
export const resultLines = (data: any, style: Style, maxDiff: number): Array<string> => {
  const tool = String(data.tool ?? "")
  if (data.blob)
    return [style.dim(`⎿ ${fmtInt(data.bytes ?? 0)} bytes of output (blob ${String(data.blob).slice(0, 12)})`)]
  const r = data.result
  if (data.isFailure) {
    const msg = r && typeof r === "object" && "error" in r ? r.error : r
    return [style.red(`⎿ ${firstLine(msg, 300, style) || "failed"}`)]
  }
  if (r && typeof r === "object") {
    if (typeof r.diff === "string" && r.diff.length > 0) {
      const st =
        typeof r.added === "number" && typeof r.removed === "number"
          ? { added: r.added as number, removed: r.removed as number }
          : diffStat(r.diff)
      return [
        style.dim(`⎿ ${escapeUnsafe(String(r.path ?? ""), style)} `) +
          style.green(`+${st.added}`) +
          style.dim(" ") +
          style.red(`-${st.removed}`),
        // (0: the diff was shown already, in the question about the change)
        ...(maxDiff > 0 ? diffLines(r.diff, style, maxDiff).map((l) => `  ${l}`) : [])
      ]
    }
    if (tool === "run_shell" || "exit_code" in r) {
      const out = escapeOutput(String(r.output ?? ""), style, { newlines: true })
        .replace(/\n+$/, "")
        .split("\n")
        .filter((l: string) => l.trim() !== "")
      const tail = out.slice(-4)
      const code = r.exit_code
      const head =
        code === 0 ? style.green("⎿ exit 0") : style.red(`⎿ exit ${code ?? "?"}${r.timed_out ? " (timed out)" : ""}`)
      const sandbox = r.sandbox && typeof r.sandbox === "object" ? r.sandbox : undefined
      const blocked: ReadonlyArray<unknown> = Array.isArray(sandbox?.blocked) ? sandbox.blocked : []
      return [
        head,
        ...(out.length > 4 ? [style.dim(`  … ${out.length - 4} lines`)] : []),
        ...tail.map((l: string) => style.dim(`  ${l}`)),
        // what the OS sandbox refused, so the user sees why the command failed
        ...blocked.map((b) => style.yellow(`  ! blocked by the sandbox: ${escapeUnsafe(String(b), style)}`)),
        ...(sandbox?.mode === "off" ? [style.yellow("  ! ran outside the sandbox (you allowed it)")] : [])
      ]
    }
    if (typeof r.content === "string") {
      const n = typeof r.total_lines === "number" ? r.total_lines : r.content.split("\n").length
      return [style.dim(`⎿ ${escapeUnsafe(String(r.path ?? ""), style)} ${fmtInt(n)} line${n === 1 ? "" : "s"}`)]
    }
    if (typeof r.member === "string" && typeof r.taskId === "string")
      return [style.dim(`⎿ ${escapeUnsafe(`${r.member} took it (${r.taskId})`, style)}`)]
    if (Array.isArray(r.files)) return [style.dim(`⎿ ${fmtInt(r.files.length)} file${r.files.length === 1 ? "" : "s"}`)]
    if (Array.isArray(r.matches)) {
      const n = r.matches.length
      const all =
        typeof r.total === "number" && r.total > n ? ` of ${fmtInt(r.total)} in ${fmtInt(r.files ?? 0)} files` : ""
      return [style.dim(`⎿ ${fmtInt(n)} match${n === 1 ? "" : "es"}${all}`)]
    }
  }
  const t = firstLine(r, 160, style)
  return t ? [style.dim(`⎿ ${t}`)] : []
}

/** A running total of tokens and cost, from `model.responded` events. */
export class Totals {
  inputTokens = 0
  outputTokens = 0
  cachedInputTokens = 0
  cost: number | undefined = undefined
  calls = 0
  add(e: Event.Envelope): void {
    if (e.type !== "model.responded") return
    const data = d(e)
    const u = data.usage ?? {}
    this.calls++
    this.inputTokens += u.inputTokens ?? 0
    this.outputTokens += u.outputTokens ?? 0
    this.cachedInputTokens += u.cachedInputTokens ?? 0
    const c = ModelInfo.cost(String(data.model ?? ""), u)
    if (c !== undefined) this.cost = (this.cost ?? 0) + c
  }
  get tokens(): number {
    return this.inputTokens + this.outputTokens
  }
  describe(): string {
    const cost = this.cost === undefined ? "" : ` · ${fmtCost(this.cost)}`
    return `${fmtInt(this.tokens)} tokens (${fmtInt(this.inputTokens)} in, ${fmtInt(this.outputTokens)} out)${cost}`
  }
}

/**
 * Lines for one event (possibly none). Lines may be longer than the terminal; `wrapAll` wraps.
 */
export const eventLines = (e: Event.Envelope, o: Options): Array<string> => {
  const s = o.style
  const data = d(e)
  /** A recorded value, escaped (absent: `fallback`). */
  const x = (v: unknown, fallback = ""): string =>
    escapeUnsafe(v === undefined || v === null ? fallback : typeof v === "string" ? v : JSON.stringify(v), s)
  const tag = agentTag(e.agent, s)
  const maxDiff = o.maxDiffLines ?? 40
  switch (e.type) {
    case "session.started": {
      const c = data.config ?? {}
      return o.transcript
        ? [
            s.bold(`muse session${data.title ? `: ${x(data.title)}` : ""}`),
            s.dim(
              `model ${x(c.model, "?")} · ${x(c.root, "?")} · approvals ${x(c.approvalMode, "?")}${c.crew ? " · crew" : ""}`
            )
          ]
        : []
    }
    case "user.input":
      return o.transcript
        ? [
            "",
            ...String(data.text ?? "")
              .split("\n")
              .map((l, i) => s.bold(s.cyan(`${i === 0 ? "›" : " "} ${escapeUnsafe(l, s)}`))),
            ""
          ]
        : []
    case "model.responded": {
      const text = String(data.text ?? "").replace(/\n+$/, "")
      if (!text) return []
      if (e.agent === "main") {
        if (!o.mainText) return []
        const md = new Markdown(s)
        return text.split("\n").map((l) => md.line(escapeUnsafe(l, s, { tabs: "spaces" })))
      }
      return [`${tag}${s.dim(firstLine(text, 200, s))}`]
    }
    case "model.failed":
      return [`${tag}${s.red(`✗ model error: ${firstLine(data.error, 300, s)}`)}`]
    case "tool.started": {
      const tool = String(data.tool ?? "")
      if (tool === "report" || tool === "verdict") return []
      return [`${tag}${s.yellow("●")} ${s.bold(toolTitle(tool, data.summary, s))}`]
    }
    case "tool.completed": {
      const tool = String(data.tool ?? "")
      if (tool === "report") {
        const p = data.result ?? {}
        return [`${tag}${s.dim(`⎿ reported (${x(p.delivered, "info")})`)}`]
      }
      return resultLines(data, s, maxDiff).map((l) => `  ${l}`)
    }
    case "tool.rejected":
      return [`  ${s.red(`⎿ rejected: ${firstLine(data.reason, 300, s)}`)}`]
    case "approval.requested":
      return o.transcript
        ? [`${tag}${s.yellow("?")} approve ${s.bold(toolTitle(String(data.tool ?? ""), data.summary, s))}`]
        : []
    case "approval.answered":
      return o.transcript
        ? [
            `  ${
              data.allow
                ? s.green(
                    `⎿ allowed${data.scope === "session" ? " for the session" : data.scope === "project" ? " always (project)" : " once"}`
                  )
                : s.red(`⎿ denied${data.reason ? `: ${firstLine(data.reason, 200, s)}` : ""}`)
            }`
          ]
        : []
    case "approval.decided":
      if (data.allow || data.by === "user") return []
      return [
        `  ${s.red(`⎿ denied by ${data.by === "rule" ? `rule ${x(data.rule)}` : `approval mode ${x(data.mode)}`}${data.reason ? `: ${firstLine(data.reason, 200, s)}` : ""}`)}`
      ]
    case "turn.completed": {
      if (e.agent !== "main") return []
      const u = data.usage ?? {}
      const tokens = (u.inputTokens ?? 0) + (u.outputTokens ?? 0)
      const head =
        data.status === "completed"
          ? s.dim("✓ done")
          : data.status === "budget"
            ? s.yellow(`■ budget reached: ${x(data.reason)}`)
            : s.red(`✗ ${x(data.status)}: ${firstLine(data.reason, 200, s)}`)
      return [
        `${head}${s.dim(` · ${x(data.steps, "0")} model call${data.steps === 1 ? "" : "s"} · ${x(data.toolCalls, "0")} tool call${data.toolCalls === 1 ? "" : "s"} · ${fmtInt(tokens)} tokens`)}`
      ]
    }
    case "turn.interrupted": {
      const why = typeof data.reason === "string" && data.reason !== "interrupted" ? `: ${x(data.reason)}` : ""
      return [`${tag}${s.yellow(`■ interrupted${why}`)}`]
    }
    case "crew.spawned":
      return [s.dim(`+ ${x(e.agent)} joined the crew (${x(data.role, "?")})`)]
    case "crew.task.received":
      // a `fail` letter is followed by the member's failure, which says why
      return data.kind === "stop" || data.kind === "fail"
        ? []
        : [`${tag}${s.dim(`← ${x(data.kind, "task")} from ${x(data.from, "?")}: ${firstLine(data.text, 160, s)}`)}`]
    case "crew.task.done":
      return [
        `${tag}${data.status === "completed" ? s.green("✓") : s.red("✗")} ${s.dim(`finished ${x(data.taskId, "task")}: ${firstLine(data.text, 160, s)}`)}`
      ]
    case "crew.member.failed":
      return [`${tag}${s.red(`✗ failed: ${firstLine(data.error, 200, s)}`)}`]
    case "crew.stopped":
      return [`${tag}${s.dim("stopped")}`]
    case "worktree.reattached": {
      const all: Array<any> = Array.isArray(data.worktrees) ? data.worktrees : []
      const back = all.filter((w) => w.status !== "failed")
      return [
        ...(back.length > 0
          ? [
              s.dim(
                `↺ worktrees back after the restart: ${back.map((w) => `${x(w.agent)} (${x(w.status)})`).join(", ")}`
              )
            ]
          : []),
        ...all
          .filter((w) => w.status === "failed")
          .map((w) => s.red(`✗ the worktree of ${x(w.agent)} could not be brought back: ${firstLine(w.error, 200, s)}`))
      ]
    }
    case "crew.review.requested":
      return [`${tag}${s.dim(`asks ${x(data.reviewer, "a reviewer")} for a review (round ${x(data.round, "1")})`)}`]
    case "crew.verdict.received":
      return [`${tag}${s.dim(`review verdict: ${x((data.data as any)?.verdict)} ${firstLine(data.text, 120, s)}`)}`]
    case "inbox.delivered":
    case "crew.reports": {
      const lines = String(data.text ?? "")
        .split("\n")
        .filter((l) => l.trim() !== "")
      return [
        s.dim(`◆ ${x(e.agent)} receives from ${x(data.from, "the crew")}:`),
        ...lines.slice(0, 4).map((l) => s.dim(`  ${escapeUnsafe(l.length > 200 ? `${l.slice(0, 199)}…` : l, s)}`)),
        ...(lines.length > 4 ? [s.dim(`  … ${lines.length - 4} more lines`)] : [])
      ]
    }
    case "context.compacted":
      return [
        s.dim(
          `⊘ ${x(e.agent)}'s context compacted: ${fmtInt(data.before ?? 0)} → ${fmtInt(data.after ?? 0)} tokens${data.force ? " (requested)" : ""}`
        )
      ]
    case "plan.proposed":
    case "plan.revised": {
      const plan = data.plan ?? {}
      const steps: Array<any> = Array.isArray(plan.steps) ? plan.steps : []
      return [
        s.bold(`▤ plan ${x(data.id)} v${x(data.version, "1")}: ${x(plan.title)}`),
        ...steps.map((st, i) => `  ${i + 1}. ${firstLine(st.intent, 160, s)}`)
      ]
    }
    case "plan.approval.answered":
      return o.transcript
        ? [s.dim(`  ⎿ plan ${x(data.decision)}${data.feedback ? `: ${firstLine(data.feedback, 160, s)}` : ""}`)]
        : []
    case "plan.step.started":
      return [s.dim(`▸ step ${x(data.step)}${data.member ? ` on ${x(data.member)}` : ""}`)]
    case "plan.step.completed":
      return [s.dim(`▸ step ${x(data.step)} ${x(data.status)}`)]
    case "plan.completed":
      return [
        s.bold(`▤ plan ${x(data.id)} ${x(data.status)}${data.reason ? `: ${firstLine(data.reason, 160, s)}` : ""}`)
      ]
    case "goal.started":
      return [
        s.bold(
          `◎ goal: ${firstLine(data.objective, 200, s)}${data.check ? s.dim(` (check: ${x(typeof data.check === "string" ? data.check : (data.check.command ?? data.check.criterion))})`) : ""}`
        )
      ]
    case "goal.check.completed":
      return [
        data.passed === true || data.verdict === "met"
          ? s.green(`◎ check passed (attempt ${x(data.attempt, "?")})`)
          : s.yellow(`◎ check not passed yet (attempt ${x(data.attempt, "?")})`)
      ]
    case "goal.completed":
      return [
        data.status === "achieved"
          ? s.green(`◎ goal achieved after ${x(data.attempts, "?")} attempt(s)`)
          : s.yellow(`◎ goal ${x(data.status)}: ${firstLine(data.reason, 200, s)}`)
      ]
    default:
      return []
  }
}

/**
 * Wrap event lines to the terminal (one column spare); a continuation is indented two columns
 * past the line's own indentation.
 */
export const wrapAll = (lines: ReadonlyArray<string>, columns: number): Array<string> =>
  lines.flatMap((l) => {
    if (width(l) < columns) return [l]
    const lead = /^ */.exec(l)![0].length
    return wrap(l, Math.max(20, columns - 1), " ".repeat(lead + 2))
  })

export { truncate }

/** Light Markdown for model text, one line at a time: headings, **bold**, `code`, fenced code. */
export class Markdown {
  private fence = false
  constructor(private readonly style: Style) {}

  /** Style a finished line (fences change the state). */
  line(l: string): string {
    const out = this.peek(l)
    if (/^\s*(```|~~~)/.test(l)) this.fence = !this.fence
    return out
  }

  /** Style a line without changing the state (a line still streaming). */
  peek(l: string): string {
    const s = this.style
    if (!s.enabled) return l
    if (/^\s*(```|~~~)/.test(l)) return s.dim(l)
    if (this.fence) return s.cyan(l)
    const h = /^(#{1,6})\s+(.*)$/.exec(l)
    if (h) return s.bold(h[2]!)
    return l
      .replace(/\*\*([^*\n]+)\*\*/g, (_m, t: string) => s.bold(t))
      .replace(/`([^`\n]+)`/g, (_m, t: string) => s.cyan(t))
  }
}
