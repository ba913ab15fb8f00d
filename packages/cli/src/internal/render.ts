/**
 * Events as lines a person reads: the transcript of `muse replay`, the progress of `muse run` and
 * the scrollback of the interactive UI all come from here.
 */
import type { Event } from "@musekit/core"
import { type Style, truncate, width, wrap } from "./ansi.js"
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

const firstLine = (s: unknown, max = 200): string => {
  const t = typeof s === "string" ? s : s === undefined || s === null ? "" : JSON.stringify(s)
  const line = t.split("\n").find((l) => l.trim() !== "") ?? ""
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
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

/** Colored unified diff, cut to `max` lines. */
export const diffLines = (diff: string, style: Style, max = 60): Array<string> => {
  const lines = diff.replace(/\n$/, "").split("\n")
  const shown = lines
    .slice(0, max)
    .map((l) =>
      l.startsWith("+++") || l.startsWith("---")
        ? style.bold(l)
        : l.startsWith("@@")
          ? style.cyan(l)
          : l.startsWith("+")
            ? style.green(l)
            : l.startsWith("-")
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

/** The one-line title of a tool call. */
export const toolTitle = (tool: string, summary: unknown): string => {
  const s = typeof summary === "string" ? summary : ""
  if (tool === "run_shell") return `$ ${firstLine(s, 300)}`
  if (s.startsWith(tool)) return s
  return s ? `${tool} ${s}` : tool
}

const agentTag = (agent: string, style: Style) => (agent === "main" ? "" : `${style.magenta(agent)} `)

/** What a tool result says, in a few lines. */
export const resultLines = (data: any, style: Style, maxDiff: number): Array<string> => {
  const tool = String(data.tool ?? "")
  if (data.blob)
    return [style.dim(`⎿ ${fmtInt(data.bytes ?? 0)} bytes of output (blob ${String(data.blob).slice(0, 12)})`)]
  const r = data.result
  if (data.isFailure) {
    const msg = r && typeof r === "object" && "error" in r ? r.error : r
    return [style.red(`⎿ ${firstLine(msg, 300) || "failed"}`)]
  }
  if (r && typeof r === "object") {
    if (typeof r.diff === "string" && r.diff.length > 0) {
      const st = diffStat(r.diff)
      return [
        style.dim(`⎿ ${r.path ?? ""} `) + style.green(`+${st.added}`) + style.dim(" ") + style.red(`-${st.removed}`),
        ...diffLines(r.diff, style, maxDiff).map((l) => `  ${l}`)
      ]
    }
    if (tool === "run_shell" || "exit_code" in r) {
      const out = String(r.output ?? "")
        .replace(/\n+$/, "")
        .split("\n")
        .filter((l: string) => l.trim() !== "")
      const tail = out.slice(-4)
      const code = r.exit_code
      const head =
        code === 0 ? style.green("⎿ exit 0") : style.red(`⎿ exit ${code ?? "?"}${r.timed_out ? " (timed out)" : ""}`)
      return [
        head,
        ...(out.length > 4 ? [style.dim(`  … ${out.length - 4} lines`)] : []),
        ...tail.map((l: string) => style.dim(`  ${l}`))
      ]
    }
    if (typeof r.content === "string") {
      const n = typeof r.total_lines === "number" ? r.total_lines : r.content.split("\n").length
      return [style.dim(`⎿ ${r.path ?? ""} ${fmtInt(n)} line${n === 1 ? "" : "s"}`)]
    }
    if (typeof r.member === "string" && typeof r.taskId === "string")
      return [style.dim(`⎿ ${r.member} took it (${r.taskId})`)]
    if (Array.isArray(r.files)) return [style.dim(`⎿ ${fmtInt(r.files.length)} file${r.files.length === 1 ? "" : "s"}`)]
    if (Array.isArray(r.matches))
      return [style.dim(`⎿ ${fmtInt(r.matches.length)} match${r.matches.length === 1 ? "" : "es"}`)]
  }
  const t = firstLine(r, 160)
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
  const tag = agentTag(e.agent, s)
  const maxDiff = o.maxDiffLines ?? 40
  switch (e.type) {
    case "session.started": {
      const c = data.config ?? {}
      return o.transcript
        ? [
            s.bold(`muse session${data.title ? `: ${data.title}` : ""}`),
            s.dim(
              `model ${c.model ?? "?"} · ${c.root ?? "?"} · approvals ${c.approvalMode ?? "?"}${c.crew ? " · crew" : ""}`
            )
          ]
        : []
    }
    case "user.input":
      return o.transcript ? ["", s.bold(s.cyan(`› ${data.text ?? ""}`)), ""] : []
    case "model.responded": {
      const text = String(data.text ?? "").replace(/\n+$/, "")
      if (!text) return []
      if (e.agent === "main") {
        if (!o.mainText) return []
        const md = new Markdown(s)
        return text.split("\n").map((l) => md.line(l))
      }
      return [`${tag}${s.dim(firstLine(text, 200))}`]
    }
    case "model.failed":
      return [`${tag}${s.red(`✗ model error: ${firstLine(data.error, 300)}`)}`]
    case "tool.started": {
      const tool = String(data.tool ?? "")
      if (tool === "report" || tool === "verdict") return []
      return [`${tag}${s.yellow("●")} ${s.bold(toolTitle(tool, data.summary))}`]
    }
    case "tool.completed": {
      const tool = String(data.tool ?? "")
      if (tool === "report") {
        const p = data.result ?? {}
        return [`${tag}${s.dim(`⎿ reported (${p.delivered ?? "info"})`)}`]
      }
      return resultLines(data, s, maxDiff).map((l) => `  ${l}`)
    }
    case "tool.rejected":
      return [`  ${s.red(`⎿ rejected: ${firstLine(data.reason, 300)}`)}`]
    case "approval.requested":
      return o.transcript
        ? [`${tag}${s.yellow("?")} approve ${s.bold(toolTitle(String(data.tool ?? ""), data.summary))}`]
        : []
    case "approval.answered":
      return o.transcript
        ? [
            `  ${
              data.allow
                ? s.green(
                    `⎿ allowed${data.scope === "session" ? " for the session" : data.scope === "project" ? " always (project)" : " once"}`
                  )
                : s.red(`⎿ denied${data.reason ? `: ${firstLine(data.reason, 200)}` : ""}`)
            }`
          ]
        : []
    case "approval.decided":
      if (data.allow || data.by === "user") return []
      return [
        `  ${s.red(`⎿ denied by ${data.by === "rule" ? `rule ${data.rule}` : `approval mode ${data.mode}`}${data.reason ? `: ${firstLine(data.reason, 200)}` : ""}`)}`
      ]
    case "turn.completed": {
      if (e.agent !== "main") return []
      const u = data.usage ?? {}
      const tokens = (u.inputTokens ?? 0) + (u.outputTokens ?? 0)
      const head =
        data.status === "completed"
          ? s.dim("✓ done")
          : data.status === "budget"
            ? s.yellow(`■ budget reached: ${data.reason ?? ""}`)
            : s.red(`✗ ${data.status}: ${firstLine(data.reason, 200)}`)
      return [
        `${head}${s.dim(` · ${data.steps ?? 0} model call${data.steps === 1 ? "" : "s"} · ${data.toolCalls ?? 0} tool call${data.toolCalls === 1 ? "" : "s"} · ${fmtInt(tokens)} tokens`)}`
      ]
    }
    case "turn.interrupted":
      return e.agent === "main" ? [s.yellow("■ interrupted")] : [`${tag}${s.yellow("■ interrupted")}`]
    case "crew.spawned":
      return [s.dim(`+ ${e.agent} joined the crew (${data.role ?? "?"})`)]
    case "crew.task.received":
      // a `fail` letter is followed by the member's failure, which says why
      return data.kind === "stop" || data.kind === "fail"
        ? []
        : [`${tag}${s.dim(`← ${data.kind ?? "task"} from ${data.from ?? "?"}: ${firstLine(data.text, 160)}`)}`]
    case "crew.task.done":
      return [
        `${tag}${data.status === "completed" ? s.green("✓") : s.red("✗")} ${s.dim(`finished ${data.taskId ?? "task"}: ${firstLine(data.text, 160)}`)}`
      ]
    case "crew.member.failed":
      return [`${tag}${s.red(`✗ failed: ${firstLine(data.error, 200)}`)}`]
    case "crew.stopped":
      return [`${tag}${s.dim("stopped")}`]
    case "worktree.reattached": {
      const all: Array<any> = Array.isArray(data.worktrees) ? data.worktrees : []
      const back = all.filter((w) => w.status !== "failed")
      return [
        ...(back.length > 0
          ? [s.dim(`↺ worktrees back after the restart: ${back.map((w) => `${w.agent} (${w.status})`).join(", ")}`)]
          : []),
        ...all
          .filter((w) => w.status === "failed")
          .map((w) => s.red(`✗ the worktree of ${w.agent} could not be brought back: ${firstLine(w.error, 200)}`))
      ]
    }
    case "crew.review.requested":
      return [`${tag}${s.dim(`asks ${data.reviewer ?? "a reviewer"} for a review (round ${data.round ?? 1})`)}`]
    case "crew.verdict.received":
      return [`${tag}${s.dim(`review verdict: ${(data.data as any)?.verdict ?? ""} ${firstLine(data.text, 120)}`)}`]
    case "inbox.delivered":
    case "crew.reports": {
      const lines = String(data.text ?? "")
        .split("\n")
        .filter((l) => l.trim() !== "")
      return [
        s.dim(`◆ ${e.agent} receives from ${data.from ?? "the crew"}:`),
        ...lines.slice(0, 4).map((l) => s.dim(`  ${l.length > 200 ? `${l.slice(0, 199)}…` : l}`)),
        ...(lines.length > 4 ? [s.dim(`  … ${lines.length - 4} more lines`)] : [])
      ]
    }
    case "context.compacted":
      return [
        s.dim(
          `⊘ ${e.agent}'s context compacted: ${fmtInt(data.before ?? 0)} → ${fmtInt(data.after ?? 0)} tokens${data.force ? " (requested)" : ""}`
        )
      ]
    case "plan.proposed":
    case "plan.revised": {
      const plan = data.plan ?? {}
      const steps: Array<any> = Array.isArray(plan.steps) ? plan.steps : []
      return [
        s.bold(`▤ plan ${data.id ?? ""} v${data.version ?? 1}: ${plan.title ?? ""}`),
        ...steps.map((st, i) => `  ${i + 1}. ${firstLine(st.intent, 160)}`)
      ]
    }
    case "plan.approval.answered":
      return o.transcript
        ? [s.dim(`  ⎿ plan ${data.decision ?? ""}${data.feedback ? `: ${firstLine(data.feedback, 160)}` : ""}`)]
        : []
    case "plan.step.started":
      return [s.dim(`▸ step ${data.step ?? ""}${data.member ? ` on ${data.member}` : ""}`)]
    case "plan.step.completed":
      return [s.dim(`▸ step ${data.step ?? ""} ${data.status ?? ""}`)]
    case "plan.completed":
      return [
        s.bold(`▤ plan ${data.id ?? ""} ${data.status ?? ""}${data.reason ? `: ${firstLine(data.reason, 160)}` : ""}`)
      ]
    case "goal.started":
      return [
        s.bold(
          `◎ goal: ${firstLine(data.objective, 200)}${data.check ? s.dim(` (check: ${typeof data.check === "string" ? data.check : (data.check.command ?? data.check.criterion ?? "")})`) : ""}`
        )
      ]
    case "goal.check.completed":
      return [
        data.passed === true || data.verdict === "met"
          ? s.green(`◎ check passed (attempt ${data.attempt ?? "?"})`)
          : s.yellow(`◎ check not passed yet (attempt ${data.attempt ?? "?"})`)
      ]
    case "goal.completed":
      return [
        data.status === "achieved"
          ? s.green(`◎ goal achieved after ${data.attempts ?? "?"} attempt(s)`)
          : s.yellow(`◎ goal ${data.status ?? ""}: ${firstLine(data.reason, 200)}`)
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
