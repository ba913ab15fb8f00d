/**
 * The interactive terminal UI of `muse`: streamed model output, a spinner with elapsed time while
 * the agents work, approval prompts that show the exact command or diff, colored diffs, the crew
 * panel, token and cost totals, slash commands with tab completion. Ctrl-C cancels the running
 * turn (the session goes on); Ctrl-C twice, Ctrl-D or /exit leave.
 *
 * Cancelling interrupts the session program (the agent records `turn.interrupted`), then resumes
 * the same session in place: the log is replayed to its end and the prompt comes back.
 */
import * as readline from "node:readline"
import { Approvals, type Event, Rewind, Stop } from "@musekit/core"
import { EventLogFile, Sandbox, SessionRuntime } from "@musekit/node"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { escapeOutput, escapeUnsafe, type Style, stringifySafe, styleFor, truncate } from "../ansi.js"
import { type CliError, ExitCode } from "../exit.js"
import * as History from "../history.js"
import * as Mcp from "../mcp.js"
import type * as Model from "../model.js"
import * as ModelInfo from "../modelInfo.js"
import * as Render from "../render.js"
import { describeTurns } from "../rewind.js"
import * as Session from "../session.js"
import * as Telemetry from "../telemetry.js"
import * as Tools from "../tools.js"
import * as Trust from "../trust.js"
import { version } from "../version.js"
import { Editor, type Key } from "./editor.js"
import { Gate } from "./gate.js"
import { Screen } from "./screen.js"

export interface InteractiveOptions {
  readonly flags: Session.Flags
  readonly env: Session.Env
  readonly stdin: NodeJS.ReadStream
  readonly stdout: NodeJS.WriteStream
  readonly resume?: { readonly session: string | undefined } | undefined
}

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
const MODES = ["read-only", "ask", "auto-edit", "auto"] as const

interface Member {
  role: string
  status: string
  task: string | null
  tasks: number
}

interface Choice {
  readonly key: string
  readonly label: string
  readonly answer?: Approvals.Answer | undefined
  /** Ask for a text first; the answer is made from it. */
  readonly withText?: { readonly prompt: string; readonly answer: (text: string) => Approvals.Answer } | undefined
  /** Show the lines of the question that are still folded. */
  readonly expand?: boolean | undefined
  /** Show the rule this answer would store and ask to confirm it. */
  readonly confirm?: "session" | "project" | undefined
  /** Back from a confirmation to the choices. */
  readonly back?: boolean | undefined
}

/** Lines of a question shown before the rest is folded behind [v]. */
const FOLD_LINES = 40

/** One answer of a question of muse itself (`/rewind`'s turn, "overwrite or keep"). */
interface MenuChoice {
  readonly key: string
  readonly label: string
  readonly value: string
}

type State =
  | { readonly _tag: "idle" }
  | {
      /** A question of muse itself (not the session's): answered with a key, a number and enter, or esc. */
      readonly _tag: "menu"
      readonly prompt: string
      readonly choices: ReadonlyArray<MenuChoice>
      /** The choices are shown in the footer (a few letters) rather than listed above (numbers). */
      readonly inline: boolean
      selected: number
      typed: string
      readonly resolve: (value: string | undefined) => void
    }
  | { readonly _tag: "busy" }
  | {
      readonly _tag: "approval"
      readonly request: Approvals.Request
      choices: ReadonlyArray<Choice>
      selected: number
      text: { readonly prompt: string; readonly answer: (text: string) => Approvals.Answer } | undefined
      /** Lines of the question not shown yet; no answer but "no" is possible until [v] shows them. */
      hidden: ReadonlyArray<string>
      readonly resolve: (a: Approvals.Answer) => void
    }

const LOCAL_COMMANDS: ReadonlyArray<{ readonly name: string; readonly description: string }> = [
  { name: "agents", description: "the crew: members, status, current task" },
  { name: "approve", description: "set the approval mode: /approve read-only|ask|auto-edit|auto" },
  { name: "sandbox", description: "the OS sandbox of shell commands: /sandbox workspace-write|read-only|off" },
  { name: "status", description: "the session: model, approvals, sandbox (and why there is none)" },
  { name: "model", description: "the model, its window and price, tokens and cost so far" },
  { name: "mcp", description: "the session's MCP servers: status and tools" },
  {
    name: "rewind",
    description: "files and conversation back to before a turn (a list to pick from): /rewind [turn:n|seq|last|undo]"
  },
  { name: "help", description: "this help" },
  { name: "clear", description: "clear the screen" },
  { name: "exit", description: "leave (the session is saved; muse resume continues it)" }
]

const noChoices: ReadonlyArray<Choice> = [
  { key: "n", label: "no", answer: { allow: false, scope: "once", reason: "the user said no" } },
  {
    key: "t",
    label: "no, tell why…",
    withText: { prompt: "tell the agent › ", answer: (t) => ({ allow: false, scope: "once", reason: t }) }
  }
]

/**
 * The answers to a question. While part of it is folded, only "show all" and the noes. "Yes, this
 * session" and "yes, always" are offered only with a rule to store (`request.proposal`), and
 * "always" only where a saved rule takes effect again (a folder with trusted settings, or none).
 */
const toolChoices = (request: Approvals.Request, hidden: number, alwaysOk: boolean): ReadonlyArray<Choice> =>
  request.unsandboxed && hidden === 0
    ? [
        // the only yes is the explicit one: outside the sandbox, this once
        {
          key: "u",
          label: "run unsandboxed",
          answer: { allow: true, scope: "once", unsandboxed: true }
        },
        ...noChoices
      ]
    : hidden > 0
      ? [
          { key: "v", label: `show all (${hidden} more lines)`, expand: true },
          ...(request.tool === "/plan"
            ? [{ key: "n", label: "drop it", answer: { allow: false, scope: "once" } } satisfies Choice]
            : noChoices)
        ]
      : request.tool === "/plan"
        ? [
            { key: "y", label: "approve", answer: { allow: true, scope: "once" } },
            {
              key: "e",
              label: "edit…",
              withText: {
                prompt: "what to change › ",
                answer: (t) => ({ allow: false, scope: "once", reason: `edit: ${t}` })
              }
            },
            {
              key: "r",
              label: "reject…",
              withText: { prompt: "why › ", answer: (t) => ({ allow: false, scope: "once", reason: t }) }
            },
            { key: "n", label: "drop it", answer: { allow: false, scope: "once" } }
          ]
        : [
            { key: "y", label: "yes", answer: { allow: true, scope: "once" } },
            ...(request.proposal ? [{ key: "s", label: "yes, this session…", confirm: "session" } as const] : []),
            ...(request.proposal && alwaysOk ? [{ key: "a", label: "yes, always…", confirm: "project" } as const] : []),
            ...noChoices
          ]

export class App {
  readonly screen: Screen
  readonly style: Style
  readonly editor: Editor
  state: State = { _tag: "busy" }
  private partial = ""
  private markdown: Render.Markdown
  private spinnerFrame = 0
  private spinner: ReturnType<typeof setInterval> | undefined
  private busySince = 0
  private activity: { label: string; since: number; output: string } | undefined
  private lastCtrlC = 0
  /** What the spinner says when no tool runs. */
  phase = "starting"
  private hint: string | undefined
  private inputWaiter: ((text: string | undefined) => void) | undefined
  private typeAhead: Array<[string | undefined, Key]> = []
  private pasting = false
  readonly totals = new Render.Totals()
  readonly crew = new Map<string, Member>()
  /** Events below this seq were recorded before the current (re)start of the session. */
  replayedBelow = 0
  approvalMode: string
  sandboxMode: Sandbox.Mode
  /** The session's sandbox service once it runs: `/status` asks it what it actually uses. */
  sandbox: Sandbox.Service | undefined
  exitRequested = false
  /** Press the session's stop button (with the reason recorded). */
  cancel: ((reason: string) => void) | undefined
  hardExit: (() => void) | undefined
  /** The last text a skill printed (a plan it shows is not shown again by its approval question). */
  lastOutput = ""
  /** Per agent, the tool call its latest question is about; diffs shown in a question are not shown again. */
  private asking = new Map<string, string>()
  private diffShown = new Set<string>()
  /** A retry of the model's HTTP client being waited for: the status line counts it down. */
  retrying:
    | { readonly until: number; readonly reason: string; readonly attempt: number; readonly of: number }
    | undefined
  /** Whether "yes, always" is offered (its rule is saved where it takes effect again). */
  alwaysOk = false
  /** Told after a "yes, always" rule was saved. */
  onAlwaysSaved: (() => void) | undefined
  /** Answer keys work only once a question has been on screen for a moment. */
  readonly gate = new Gate(() => this.draw())

  /** For `/rewind`: the session's turns, and the files someone else changed since a point (or why it cannot go there). */
  rewinder:
    | {
        readonly turns: () => Promise<ReadonlyArray<Rewind.Turn>>
        readonly changed: (
          spec: string
        ) => Promise<{ readonly files: ReadonlyArray<string> } | { readonly error: string }>
      }
    | undefined

  /** Lines for `/mcp` (the session's MCP servers now). */
  mcpLines: (() => Effect.Effect<Array<string>>) | undefined

  constructor(
    readonly out: NodeJS.WriteStream,
    readonly session: string,
    readonly config: SessionRuntime.Config,
    readonly modelSource: string,
    readonly skills: ReadonlyArray<{ readonly name: string; readonly description: string }>
  ) {
    this.style = styleFor(out)
    this.screen = new Screen(out, this.style)
    this.approvalMode = config.approvalMode
    this.sandboxMode = config.sandbox?.mode ?? "workspace-write"
    this.markdown = new Render.Markdown(this.style)
    this.editor = new Editor((text) => this.completions(text))
  }

  // ----------------------------------------------------------------------------------- commands

  commandNames(): Array<string> {
    return [...new Set([...LOCAL_COMMANDS.map((c) => c.name), ...this.skills.map((s) => s.name), "quit"])].sort()
  }

  completions(text: string): ReadonlyArray<string> {
    if (!text.startsWith("/")) return []
    const approve = /^\/approve\s+(\S*)$/.exec(text)
    if (approve) return MODES.filter((m) => m.startsWith(approve[1]!)).map((m) => `/approve ${m}`)
    const sandbox = /^\/sandbox\s+(\S*)$/.exec(text)
    if (sandbox) return Sandbox.modes.filter((m) => m.startsWith(sandbox[1]!)).map((m) => `/sandbox ${m}`)
    if (/\s/.test(text)) return []
    return this.commandNames()
      .filter((n) => `/${n}`.startsWith(text))
      .map((n) => `/${n}`)
  }

  // ----------------------------------------------------------------------------------- drawing

  private statusLine(): string {
    const s = this.style
    const working = [...this.crew.entries()].filter(
      ([, m]) => m.status === "working" || m.status === "waiting-approval"
    )
    const crew = this.config.crew
      ? working.length > 0
        ? `crew ${working.length} working`
        : this.crew.size > 0
          ? `crew ${this.crew.size} idle`
          : "crew ready"
      : "no crew"
    const cost = this.totals.cost === undefined ? "" : ` · ${Render.fmtCost(this.totals.cost)}`
    return s.dim(
      `${this.config.model} · ${this.approvalMode} · ${crew} · ${Render.fmtInt(this.totals.tokens)} tokens${cost}`
    )
  }

  private partialLines(): Array<string> {
    if (this.partial === "") return []
    return [this.markdown.peek(this.partial)]
  }

  draw(): void {
    const s = this.style
    const w = this.screen.lineWidth
    const st = this.state
    const lines: Array<string> = this.partialLines()
    if (st._tag === "busy") {
      const frame = s.cyan(SPINNER[this.spinnerFrame % SPINNER.length]!)
      const now = performance.now()
      const act = this.activity
      const retry = this.retrying
      const wait = retry ? Math.ceil((retry.until - Date.now()) / 1000) : 0
      if (retry && wait <= 0) this.retrying = undefined
      const label =
        retry && wait > 0
          ? s.yellow(`retrying in ${wait} s: ${retry.reason} (retry ${retry.attempt} of ${retry.of})`)
          : act
            ? act.label
            : this.phase
      const elapsed = Render.fmtDuration(now - (act ? act.since : this.busySince))
      lines.push(truncate(`${frame} ${label} ${s.dim(`· ${elapsed}`)}`, w))
      if (act?.output) lines.push(truncate(s.dim(`  ${act.output}`), w))
      for (const [name, m] of this.crew) {
        if (m.status === "working" || m.status === "waiting-approval") {
          lines.push(
            truncate(
              s.dim(
                `  ${s.magenta(escapeUnsafe(name, s))} ${m.status}${m.task ? `: ${escapeUnsafe(m.task.replace(/ +/g, " "), s)}` : ""}`
              ),
              w
            )
          )
        }
      }
      lines.push(this.statusLine() + s.dim(" · ctrl-c cancels"))
      this.screen.setFooter(lines)
      return
    }
    if (st._tag === "approval") {
      if (st.text) {
        const v = this.editor.view(st.text.prompt.length, this.screen.lineWidth)
        lines.push(s.yellow(st.text.prompt) + v.text)
        lines.push(this.statusLine())
        this.screen.setFooter(lines, { row: lines.length - 2, col: v.col })
        return
      }
      if (!this.gate.armed) {
        lines.push(`${s.yellow("?")} ${s.dim("read the question above; the answer keys work in a moment")}`)
        lines.push(this.statusLine())
        this.screen.setFooter(lines)
        return
      }
      const opts = st.choices
        .map((c, i) => {
          const text = `[${c.key}] ${c.label}`
          return i === st.selected ? s.inverse(text) : text
        })
        .join("  ")
      lines.push(`${s.yellow("?")} ${opts}`)
      const dropped = this.gate.dropped
      lines.push(
        this.statusLine() +
          s.dim(
            dropped > 0
              ? ` · ${dropped} key${dropped === 1 ? "" : "s"} typed before the question ignored`
              : " · ←/→ enter, or a letter"
          )
      )
      this.screen.setFooter(lines)
      return
    }
    if (st._tag === "menu") {
      if (!this.gate.armed) {
        lines.push(`${s.yellow("?")} ${s.dim("read the question above; the answer keys work in a moment")}`)
        lines.push(this.statusLine())
        this.screen.setFooter(lines)
        return
      }
      const opts = st.inline
        ? st.choices
            .map((c, i) => {
              const text = `[${c.key}] ${c.label}`
              return i === st.selected ? s.inverse(text) : text
            })
            .join("  ")
        : `${st.prompt} ${st.typed === "" ? s.dim(`(enter: ${st.choices[st.selected]!.key})`) : s.bold(st.typed)}`
      lines.push(`${s.yellow("?")} ${opts}`)
      const dropped = this.gate.dropped
      lines.push(
        this.statusLine() +
          s.dim(
            dropped > 0
              ? ` · ${dropped} key${dropped === 1 ? "" : "s"} typed before the question ignored`
              : st.inline
                ? " · ←/→ enter, or a letter; esc cancels"
                : " · a number and enter, ↑/↓; esc cancels"
          )
      )
      this.screen.setFooter(lines)
      return
    }
    // idle: the prompt
    if (this.hint) lines.push(this.hint)
    else if (this.editor.candidates.length > 0) lines.push(s.dim(this.editor.candidates.join("  ")))
    const prompt = "› "
    const v = this.editor.view(prompt.length, this.screen.lineWidth)
    lines.push(s.bold(s.cyan(prompt)) + v.text)
    lines.push(this.statusLine())
    this.screen.setFooter(lines, { row: lines.length - 2, col: v.col })
  }

  print(lines: ReadonlyArray<string>): void {
    this.screen.print(lines)
    this.draw()
  }

  /** Streamed text: whole lines go to the scrollback, the rest stays in the footer. */
  text(delta: string): void {
    // the model's text is escaped as it arrives (each unsafe character on its own, so pieces cannot combine)
    this.partial += escapeUnsafe(delta, this.style, { newlines: true, tabs: "spaces" })
    const parts = this.partial.split("\n")
    this.partial = parts.pop() ?? ""
    const done: Array<string> = parts.map((l) => this.markdown.line(l))
    const wrapped = this.screen.wrap(this.partial)
    if (wrapped.length > 1) {
      done.push(...wrapped.slice(0, -1).map((l) => this.markdown.peek(l)))
      this.partial = wrapped[wrapped.length - 1]!
    }
    if (done.length > 0) this.screen.print(done)
    this.draw()
  }

  flushText(): void {
    if (this.partial !== "") {
      const p = this.partial
      this.partial = ""
      this.screen.print([this.markdown.line(p)])
    }
  }

  setBusy(phase = "thinking"): void {
    this.phase = phase
    this.state = { _tag: "busy" }
    this.busySince = performance.now()
    this.activity = undefined
    this.hint = undefined
    if (!this.spinner) {
      this.spinner = setInterval(() => {
        this.spinnerFrame++
        if (this.state._tag === "busy") this.draw()
      }, 100)
    }
    this.draw()
  }

  private stopSpinner(): void {
    if (this.spinner) clearInterval(this.spinner)
    this.spinner = undefined
  }

  // ----------------------------------------------------------------------------------- events

  onEvent(e: Event.Envelope): void {
    // resuming replays the log first; what is on screen already is not shown again
    if (e.seq < this.replayedBelow) return
    this.totals.add(e)
    const data = (e.data ?? {}) as any
    this.trackCrew(e, data)
    if (e.type === "model.responded" || e.type === "model.failed") this.retrying = undefined
    if (e.type === "approval.requested" && typeof data.callId === "string") this.asking.set(e.agent, data.callId)
    // the plan skill tells its plans and steps itself (its output); the events would say it again
    if (e.type.startsWith("plan.")) {
      this.draw()
      return
    }
    if (e.type === "model.requested" && e.agent === "main") {
      this.activity = undefined
      this.phase = "thinking"
    }
    if (e.type === "tool.started" && e.agent === "main") {
      this.flushText()
      this.activity = {
        label: Render.toolTitle(String(data.tool ?? ""), data.summary, this.style),
        since: performance.now(),
        output: ""
      }
    }
    if (e.type === "tool.completed" && e.agent === "main") this.activity = undefined
    if (e.type === "model.responded" && e.agent === "main") this.flushText()
    if (e.type === "approval.decided" && data.by === "user") {
      const how = data.allow
        ? data.scope === "session"
          ? "allowed for this session"
          : data.scope === "project"
            ? "allowed always (saved in .muse/permissions.json)"
            : "allowed once"
        : `denied${data.reason ? `: ${escapeUnsafe(String(data.reason), this.style)}` : ""}`
      this.print([`  ${data.allow ? this.style.green(`⎿ ${how}`) : this.style.red(`⎿ ${how}`)}`])
      if (data.allow && data.scope === "project") this.onAlwaysSaved?.()
      return
    }
    const diffSeen = e.type === "tool.completed" && this.diffShown.delete(`${e.agent}\u0000${data.callId}`)
    const lines = Render.eventLines(e, {
      style: this.style,
      columns: this.screen.columns,
      mainText: false,
      transcript: false,
      // a diff the question showed is not shown again: its stat line says it was applied
      maxDiffLines: diffSeen ? 0 : 40
    })
    const wrapped = Render.wrapAll(lines, this.screen.columns)
    if (wrapped.length > 0) {
      this.print(e.type === "turn.completed" || e.type === "turn.interrupted" ? [...wrapped, ""] : wrapped)
    } else this.draw()
  }

  trackCrew(e: Event.Envelope, data: any): void {
    const m = this.crew.get(e.agent)
    switch (e.type) {
      case "crew.spawned":
        this.crew.set(e.agent, { role: String(data.role ?? "?"), status: "idle", task: null, tasks: 0 })
        return
      case "crew.task.received":
        if (m && data.kind !== "stop" && data.kind !== "fail") {
          m.status = "working"
          m.task = String(data.text ?? "").split("\n")[0] ?? null
          m.tasks++
        }
        return
      case "crew.task.done":
      case "crew.review.done":
        if (m) {
          m.status = "idle"
          m.task = null
        }
        return
      case "crew.member.failed":
        if (m) m.status = "failed"
        return
      case "crew.stopped":
        if (m) m.status = "stopped"
        return
      case "approval.requested":
        if (m) m.status = "waiting-approval"
        return
      case "approval.answered":
        if (m && m.status === "waiting-approval") m.status = "working"
        return
    }
  }

  toolOutput(chunk: string): void {
    if (!this.activity) return
    const lines = chunk.split("\n").filter((l) => l.trim() !== "")
    if (lines.length > 0) this.activity.output = escapeOutput(lines[lines.length - 1]!, this.style)
    this.draw()
  }

  crewPanel(): Array<string> {
    const s = this.style
    if (!this.config.crew) return [s.dim("The crew is off in this session (--no-crew).")]
    if (this.crew.size === 0) return [s.dim("No crew members yet: the main agent spawns them when it delegates work.")]
    const lines = [s.bold("crew")]
    for (const [name, m] of this.crew) {
      const color =
        m.status === "working"
          ? s.green
          : m.status === "failed"
            ? s.red
            : m.status === "waiting-approval"
              ? s.yellow
              : s.dim
      lines.push(
        `  ${s.magenta(escapeUnsafe(name.padEnd(12), s))} ${escapeUnsafe(m.role.padEnd(9), s)} ${color(m.status.padEnd(16))} ${s.dim(`${m.tasks} task${m.tasks === 1 ? "" : "s"}`)}${m.task ? `  ${escapeUnsafe(m.task, s)}` : ""}`
      )
    }
    return lines
  }

  helpLines(): Array<string> {
    const s = this.style
    const rows: Array<[string, string]> = [
      ...this.skills.map((k): [string, string] => [
        `/${escapeUnsafe(k.name, s)}`,
        escapeUnsafe(k.description.split(". ")[0]!, s)
      ]),
      ...LOCAL_COMMANDS.map((c): [string, string] => [`/${c.name}`, c.description])
    ]
    return [
      s.bold("Type a task and press enter. Commands:"),
      ...rows.map(([n, d]) => `  ${s.cyan(n.padEnd(10))} ${d}`),
      "",
      s.bold("Keys:"),
      `  ${s.cyan("tab".padEnd(10))} complete a command`,
      `  ${s.cyan("↑ ↓".padEnd(10))} input history`,
      `  ${s.cyan("ctrl-c".padEnd(10))} cancel the running turn; twice: exit`,
      `  ${s.cyan("ctrl-d".padEnd(10))} exit (the session is saved; muse resume continues it)`
    ]
  }

  /**
   * The sandbox as it stands: the session's sandbox service says (its launch, and why a long-lived
   * sandbox fell back to one per command); before it runs, the mode set here and this machine's probe.
   */
  sandboxStatus(): Sandbox.Status {
    if (this.sandbox) return { ...Effect.runSync(this.sandbox.status), mode: this.sandboxMode }
    const settings = this.config.sandbox
    const availability = Sandbox.detect()
    return {
      mode: this.sandboxMode,
      active: this.sandboxMode !== "off" && availability.available,
      availability,
      network: settings?.network?.allow ?? [],
      writable: settings?.writable ?? [],
      processes: settings?.processes ?? Sandbox.DEFAULT_PROCESSES,
      launch: availability.backend === "bubblewrap" && settings?.reuse !== false ? "long-lived" : "per-command",
      launchReason: undefined
    }
  }

  statusLines(): Array<string> {
    const s = this.style
    const st = this.sandboxStatus()
    const line = escapeUnsafe(Sandbox.describe(st), s)
    return [
      `${s.bold("session")} ${escapeUnsafe(this.session, s)} · ${escapeUnsafe(this.config.root, s)}`,
      `  model ${escapeUnsafe(this.config.model, s)} · approvals ${escapeUnsafe(this.approvalMode, s)}`,
      `  ${st.active || st.mode === "off" ? line : s.yellow(line)}`,
      ...(st.writable.length > 0 ? [s.dim(`  also writable: ${escapeUnsafe(st.writable.join(", "), s)}`)] : []),
      s.dim("  /sandbox workspace-write|read-only|off changes it; /approve changes the approval mode")
    ]
  }

  modelLines(): Array<string> {
    const s = this.style
    const info = ModelInfo.lookup(this.config.model)
    const price = info?.pricing
      ? `$${info.pricing.input}/$${info.pricing.output} per million tokens in/out`
      : "no list price known"
    return [
      `${s.bold(escapeUnsafe(this.config.model, s))} ${s.dim(`(from ${escapeUnsafe(this.modelSource, s)})`)}`,
      s.dim(`  context window ${Render.fmtInt(ModelInfo.contextWindow(this.config.model))} tokens · ${price}`),
      s.dim(`  this session: ${this.totals.describe()}`),
      s.dim("  A session keeps its model; start another with: muse --model <provider/model>")
    ]
  }

  // ----------------------------------------------------------------------------------- input

  /** The next input for the session (local commands are handled here). */
  nextInput(): Promise<string | undefined> {
    this.flushText()
    if (this.exitRequested) return Promise.resolve(undefined)
    this.stopSpinner()
    this.state = { _tag: "idle" }
    this.activity = undefined
    this.draw()
    return new Promise((resolve) => {
      this.inputWaiter = resolve
      const keys = this.typeAhead
      this.typeAhead = []
      for (const [str, key] of keys) {
        if (this.state._tag !== "idle") {
          this.typeAhead.push([str, key])
          continue
        }
        this.onKey(str, key)
      }
    })
  }

  private submit(text: string): void {
    const t = text.trim()
    if (t === "") {
      this.draw()
      return
    }
    const s = this.style
    const shown = escapeUnsafe(t, s)
    if (t.startsWith("/")) {
      const [cmd, ...rest] = t.slice(1).split(/\s+/)
      const arg = rest.join(" ")
      switch (cmd) {
        case "help":
          this.print([s.cyan(`› ${shown}`), ...this.helpLines(), ""])
          return
        case "agents":
          this.print([s.cyan(`› ${shown}`), ...this.crewPanel(), ""])
          return
        case "model":
          this.print([s.cyan(`› ${shown}`), ...this.modelLines(), ""])
          return
        case "status":
          this.print([s.cyan(`› ${shown}`), ...this.statusLines(), ""])
          return
        case "sandbox":
          if (arg === "") {
            this.print([s.cyan(`› ${shown}`), ...this.statusLines(), ""])
            return
          }
          if (!(Sandbox.modes as ReadonlyArray<string>).includes(arg)) {
            this.print([
              s.cyan(`› ${shown}`),
              s.yellow(`usage: /sandbox ${Sandbox.modes.join("|")} (now: ${this.sandboxMode})`),
              ""
            ])
            return
          }
          this.sandboxMode = arg as Sandbox.Mode
          break
        case "mcp": {
          const lines = this.mcpLines ? Effect.runSync(this.mcpLines()) : ["no MCP servers in this session."]
          this.print([s.cyan(`› ${t}`), ...lines, ""])
          return
        }
        case "clear":
          this.out.write("\x1b[2J\x1b[3J\x1b[H")
          this.draw()
          return
        case "exit":
        case "quit":
          this.finishInput(undefined)
          return
        case "rewind":
          if (this.rewinder) {
            this.rewind(t, this.rewinder).catch((e) => {
              this.print([this.style.yellow(`rewind: ${escapeUnsafe(String(e?.message ?? e), this.style)}`), ""])
              this.backToIdle()
            })
            return
          }
          break
        case "approve":
          if (!(MODES as ReadonlyArray<string>).includes(arg)) {
            this.print([
              s.cyan(`› ${t}`),
              s.yellow(`usage: /approve ${MODES.join("|")} (now: ${this.approvalMode})`),
              ""
            ])
            return
          }
          this.approvalMode = arg
          break
        default:
          if (!this.skills.some((k) => k.name === cmd)) {
            this.print([
              s.cyan(`› ${shown}`),
              s.yellow(`unknown command /${escapeUnsafe(cmd ?? "", s)}; /help lists them`),
              ""
            ])
            return
          }
      }
    }
    this.print([s.bold(s.cyan(`› ${shown}`)), ""])
    this.finishInput(t)
  }

  /**
   * `/rewind [target]`: without a target, the turns to pick from (prompt and changed files); when
   * files were changed by someone else since that point, whether to overwrite or keep them. The
   * session then gets `/rewind <target> [--force]` as its input.
   */
  private async rewind(typed: string, rewinder: NonNullable<App["rewinder"]>): Promise<void> {
    const s = this.style
    this.state = { _tag: "busy" }
    this.print([s.cyan(`› ${escapeUnsafe(typed, s)}`)])
    const request = Rewind.parseInput(typed) ?? { spec: "last", force: false }
    let spec = request.spec
    let force = request.force
    if (/^\/rewind\s*$/.test(typed)) {
      const turns = await rewinder.turns()
      if (turns.length === 0) {
        this.print([s.yellow("nothing to rewind: no turn has started yet"), ""])
        this.backToIdle()
        return
      }
      const picked = await this.ask(
        [
          "rewind to just before a turn: its files back as they were then, and the conversation from there",
          ...describeTurns(turns).map((l, i) => `  ${s.bold(`[${turns[i]!.n}]`)} ${escapeUnsafe(l, s)}`)
        ],
        "which turn?",
        turns.map((t) => ({ key: String(t.n), label: `turn ${t.n}`, value: `turn:${t.n}` })),
        false
      )
      if (picked === undefined) {
        this.cancelled()
        return
      }
      spec = picked
    }
    if (!force) {
      const check = await rewinder.changed(spec)
      if ("error" in check) {
        this.print([s.yellow(`rewind: ${escapeUnsafe(check.error, s)}`), ""])
        this.backToIdle()
        return
      }
      if (check.files.length > 0) {
        const answer = await this.ask(
          [
            `${s.yellow("?")} changed since the session last wrote ${check.files.length === 1 ? "it" : "them"}, by someone else:`,
            ...check.files.map((f) => `    ${s.bold(escapeUnsafe(f, s))}`),
            s.dim("  overwrite: what they hold now stays in the log, so /rewind undo brings it back")
          ],
          "overwrite or keep?",
          [
            { key: "k", label: "keep them (rewind the rest)", value: "keep" },
            { key: "o", label: "overwrite them", value: "overwrite" }
          ],
          true
        )
        if (answer === undefined) {
          this.cancelled()
          return
        }
        force = answer === "overwrite"
      }
    }
    const text = `/rewind ${spec}${force ? " --force" : ""}`
    this.print([s.bold(s.cyan(`› ${escapeUnsafe(text, s)}`)), ""])
    this.finishInput(text)
  }

  /** Ask a question of muse itself; `undefined` when the person cancels it (esc, ctrl-c). */
  private ask(
    lines: ReadonlyArray<string>,
    prompt: string,
    choices: ReadonlyArray<MenuChoice>,
    inline: boolean
  ): Promise<string | undefined> {
    this.screen.print(lines)
    return new Promise((resolve) => {
      this.state = {
        _tag: "menu",
        prompt,
        choices,
        inline,
        selected: inline ? 0 : choices.length - 1,
        typed: "",
        resolve: (v) => {
          this.state = { _tag: "busy" }
          resolve(v)
        }
      }
      this.gate.arm()
      this.draw()
    })
  }

  private cancelled(): void {
    this.print([this.style.dim("  not rewound"), ""])
    this.backToIdle()
  }

  /** Back to the prompt of the same input wait (the keys typed meanwhile go to it). */
  private backToIdle(): void {
    this.state = { _tag: "idle" }
    this.draw()
    const keys = this.typeAhead
    this.typeAhead = []
    for (const [str, key] of keys) this.onKey(str, key)
  }

  private finishInput(text: string | undefined): void {
    const w = this.inputWaiter
    this.inputWaiter = undefined
    if (text === undefined) this.exitRequested = true
    else this.setBusy()
    w?.(text)
  }

  /**
   * Ask about a tool call. The question shows exactly what would run: the whole command (every
   * line of it), the whole diff; all of it escaped. What does not fit in 40 lines is folded behind
   * [v], and only "no" is possible until it has been shown.
   */
  askApproval(request: Approvals.Request, resolve: (a: Approvals.Answer) => void): void {
    this.flushText()
    this.stopSpinner()
    const s = this.style
    const who = `${s.magenta(escapeUnsafe(request.agent, s))} `
    const verb = request.unsandboxed
      ? "run OUTSIDE the sandbox"
      : request.effect === "exec"
        ? "run"
        : request.effect === "write"
          ? "change a file"
          : "use"
    const command = request.summary.replace(/\n$/, "")
    const multiLine = request.tool === "run_shell" && command.includes("\n")
    const head =
      request.tool === "/plan"
        ? `${s.yellow("?")} ${who}approve the plan: ${s.bold(escapeUnsafe(request.summary, s))}`
        : multiLine
          ? `${s.yellow("?")} ${who}wants to run a command of ${command.split("\n").length} lines:`
          : `${s.yellow("?")} ${who}wants to ${verb}: ${s.bold(Render.toolTitle(request.tool, request.summary, s))}`
    const body: Array<string> = []
    if (multiLine) body.push(...Render.commandLines(request.summary, s).map((l) => `  ${s.bold(l)}`))
    // why it asks although a rule or the mode might let it run (a protected path, what no rule covers)
    for (const w of request.warnings ?? []) body.push(`  ${s.yellow("!")} ${escapeUnsafe(w, s)}`)
    const planAbove =
      request.tool === "/plan" && request.preview !== undefined && this.lastOutput.endsWith(request.preview)
    if (planAbove) body.push(s.dim("  (the plan above)"))
    else if (request.preview) {
      const callId = this.asking.get(request.agent)
      if (request.tool !== "/plan" && callId !== undefined) this.diffShown.add(`${request.agent}\u0000${callId}`)
      body.push(
        ...(request.tool === "/plan"
          ? request.preview.split("\n").map((l) => `  ${escapeUnsafe(l, s, { tabs: "spaces" })}`)
          : Render.diffLines(request.preview, s, Number.POSITIVE_INFINITY).map((l) => `  ${l}`))
      )
    }
    const hidden = body.length > FOLD_LINES ? body.slice(FOLD_LINES) : []
    this.screen.print([
      head,
      ...body.slice(0, FOLD_LINES),
      ...(hidden.length > 0
        ? [s.yellow(`  … ${hidden.length} more lines: [v] shows them (answering yes needs them seen)`)]
        : [])
    ])
    this.state = {
      _tag: "approval",
      request,
      choices: toolChoices(request, hidden.length, this.alwaysOk),
      selected: 0,
      text: undefined,
      hidden,
      resolve
    }
    this.gate.arm()
    this.draw()
  }

  /** Show the rule a "this session" / "always" answer would store, and ask to confirm it. */
  private confirmRule(scope: "session" | "project"): void {
    const st = this.state
    if (st._tag !== "approval" || !st.request.proposal) return
    const s = this.style
    const rule: Approvals.Rule = { ...st.request.proposal, scope }
    const answer: Approvals.Answer = { allow: true, scope, rule }
    this.screen.print([
      `  ${s.yellow("?")} ${
        scope === "session"
          ? "for the rest of this session, run without asking every call this rule matches:"
          : "from now on, run without asking every call this rule matches (saved in .muse/permissions.json):"
      }`,
      `    ${s.bold(escapeUnsafe(Approvals.describeRule(rule), s))}`,
      `    ${s.dim("stored as")} ${escapeUnsafe(stringifySafe(rule), s)}`
    ])
    st.choices = [
      { key: "y", label: "yes, store this rule and run it", answer },
      { key: "n", label: "no, back to the question", back: true }
    ]
    st.selected = 1
    this.gate.arm()
    this.draw()
  }

  private answer(a: Approvals.Answer): void {
    const st = this.state
    if (st._tag !== "approval") return
    this.setBusy()
    st.resolve(a)
  }

  onKey(str: string | undefined, key: Key): void {
    // bracketed paste: a pasted newline is part of the text, not "submit"
    if (key.name === "paste-start" || key.name === "paste-end") {
      this.pasting = key.name === "paste-start"
      return
    }
    if (this.pasting && (key.name === "return" || key.name === "enter")) {
      str = " "
      key = { name: "space", sequence: " " }
    }
    if (key.ctrl && key.name === "c") {
      this.ctrlC()
      return
    }
    if (key.ctrl && key.name === "l") {
      this.out.write("\x1b[2J\x1b[3J\x1b[H")
      this.draw()
      return
    }
    const st = this.state
    if (st._tag === "idle") {
      if (key.ctrl && key.name === "d") {
        if (this.editor.text === "") {
          this.finishInput(undefined)
          return
        }
        return
      }
      this.hint = undefined
      const r = this.editor.key(str, key)
      if (r._tag === "submit") {
        this.submit(r.text)
        return
      }
      this.draw()
      return
    }
    if (st._tag === "menu") {
      // as with approvals: a paste, or a key that came before the question could be read, never answers it
      if (this.pasting || !this.gate.take()) {
        if (this.pasting) this.gate.dropped++
        this.draw()
        return
      }
      if (key.name === "escape") {
        st.resolve(undefined)
        return
      }
      const n = st.choices.length
      if (key.name === "up" || key.name === "left") st.selected = (st.selected + n - 1) % n
      else if (key.name === "down" || key.name === "right" || key.name === "tab") st.selected = (st.selected + 1) % n
      else if (key.name === "backspace") st.typed = st.typed.slice(0, -1)
      else if (key.name === "return" || key.name === "enter") {
        const c = st.typed === "" ? st.choices[st.selected] : st.choices.find((x) => x.key === st.typed)
        if (c) {
          st.resolve(c.value)
          return
        }
        st.typed = ""
      } else if (str && /^[0-9]$/.test(str) && !st.inline) {
        st.typed = `${st.typed}${str}`.slice(-6)
      } else if (str && st.inline) {
        const c = st.choices.find((x) => x.key === str.toLowerCase())
        if (c) {
          st.resolve(c.value)
          return
        }
      }
      this.draw()
      return
    }
    if (st._tag === "approval") {
      if (st.text) {
        if (key.name === "escape") {
          st.text = undefined
          this.editor.clear()
          this.draw()
          return
        }
        const r = this.editor.key(str, key)
        if (r._tag === "submit") {
          const t = r.text.trim()
          const make = st.text.answer
          st.text = undefined
          if (t === "") {
            this.draw()
            return
          }
          this.answer(make(t))
          return
        }
        this.draw()
        return
      }
      // a paste, or a key that came before the question could be read, never answers it
      if (this.pasting) {
        this.gate.dropped++
        this.draw()
        return
      }
      if (!this.gate.take()) {
        this.draw()
        return
      }
      const pick = (c: Choice) => {
        if (c.withText) {
          st.text = c.withText
          this.editor.clear()
          return this.draw()
        }
        if (c.expand) {
          const rest = st.hidden
          st.hidden = []
          this.screen.print(rest)
          st.choices = toolChoices(st.request, 0, this.alwaysOk)
          st.selected = 0
          this.gate.arm()
          return this.draw()
        }
        if (c.confirm) return this.confirmRule(c.confirm)
        if (c.back) {
          st.choices = toolChoices(st.request, 0, this.alwaysOk)
          st.selected = 0
          this.gate.arm()
          return this.draw()
        }
        if (c.answer) this.answer(c.answer)
      }
      const back = st.choices.find((c) => c.back)
      if (key.name === "escape" && back) {
        pick(back)
        return
      }
      if (key.name === "left") st.selected = (st.selected + st.choices.length - 1) % st.choices.length
      else if (key.name === "right" || key.name === "tab") st.selected = (st.selected + 1) % st.choices.length
      else if (key.name === "return" || key.name === "enter") {
        pick(st.choices[st.selected]!)
        return
      } else if (str) {
        const c = st.choices.find((x) => x.key === str.toLowerCase())
        if (c) {
          pick(c)
          return
        }
      }
      this.draw()
      return
    }
    // busy: keys are kept and replayed at the next prompt (type-ahead)
    if (this.typeAhead.length < 4096) this.typeAhead.push([str, key])
  }

  private ctrlC(): void {
    const now = Date.now()
    const twice = now - this.lastCtrlC < 1500
    this.lastCtrlC = now
    const st = this.state
    if (st._tag === "menu") {
      st.resolve(undefined)
      return
    }
    if (st._tag === "idle") {
      if (this.editor.text !== "") {
        this.editor.clear()
        this.draw()
        return
      }
      if (twice) {
        this.finishInput(undefined)
        return
      }
      this.hint = this.style.dim("press ctrl-c again to exit (or ctrl-d)")
      this.draw()
      return
    }
    if (twice) {
      this.exitRequested = true
      this.hardExit?.()
      return
    }
    if (st._tag === "approval") this.state = { _tag: "busy" }
    this.flushText()
    this.print([this.style.yellow("■ stopping: the running turn and the crew's work (ctrl-c again to exit)")])
    this.phase = "stopping"
    this.activity = undefined
    this.cancel?.("stopped by the user (Ctrl-C)")
  }

  /** End the wait for input, if the session is waiting for it (leaving). */
  finishInputIfWaiting(): void {
    if (this.state._tag === "idle") this.finishInput(undefined)
  }

  close(lines: ReadonlyArray<string>): void {
    this.stopSpinner()
    this.flushText()
    this.screen.close(lines)
  }
}

const welcome = (app: App, prepared: Session.Prepared, session: string, resumed: boolean): Array<string> => {
  const s = app.style
  const home = process.env.HOME
  const root = home && prepared.root.startsWith(home) ? `~${prepared.root.slice(home.length)}` : prepared.root
  return [
    `${s.bold("muse")} ${s.dim(version())} · ${s.cyan(escapeUnsafe(prepared.config.model, s))} · ${escapeUnsafe(root, s)}`,
    s.dim(
      `${resumed ? "resumed" : "session"} ${session} · approvals ${prepared.config.approvalMode} · sandbox ${
        app.sandboxStatus().active ? app.sandboxMode : app.sandboxMode === "off" ? "off" : "unavailable"
      } · crew ${prepared.config.crew ? "on" : "off"}`
    ),
    s.dim("Type a task, or /help. Ctrl-C cancels a turn, Ctrl-D exits."),
    ...prepared.notices.map((w) => s.yellow(`! ${escapeUnsafe(w, s)}`)),
    ...prepared.plugins.warnings.map((w) => s.yellow(`! ${escapeUnsafe(w, s)}`)),
    ""
  ]
}

type KeyHandler = (str: string | undefined, key: Key) => void

type TrustAnswer = "trust" | "once" | "no" | "quit"

/**
 * Ask once, before the session starts, whether the folder's own settings may take effect. The
 * question lists what they set (escaped); the default is no; keys typed before it was drawn do
 * not answer it.
 */
const askTrust = (
  out: NodeJS.WriteStream,
  style: Style,
  decision: { readonly project: Trust.Project; readonly status: Trust.Status },
  listen: (handler: KeyHandler) => void
): Promise<TrustAnswer> =>
  new Promise((resolve) => {
    const s = style
    const screen = new Screen(out, s)
    const status = decision.status
    screen.print([
      status._tag === "changed"
        ? `${s.yellow("?")} ${s.bold("This folder's own settings changed since you trusted it")} (${escapeUnsafe(status.changed.join(", "), s)}). Trust them again?`
        : `${s.yellow("?")} ${s.bold("Trust this folder?")} ${escapeUnsafe(decision.project.root, s)}`,
      s.dim("  If you trust it, its own files take effect:"),
      ...Trust.describe(decision.project, s),
      s.dim("  They can let the agent do more than your own settings do, such as run commands without asking."),
      ...(status._tag === "untrusted" && status.problem ? [s.yellow(`  ! ${escapeUnsafe(status.problem, s)}`)] : [])
    ])
    const choices: ReadonlyArray<readonly [string, string, TrustAnswer]> = [
      ["y", "yes, trust it", "trust"],
      ["o", "only this session", "once"],
      ["n", "no, my own settings only", "no"]
    ]
    let selected = 2
    const gate = new Gate(() => draw())
    const draw = () => {
      if (!gate.armed) {
        screen.setFooter([`${s.yellow("?")} ${s.dim("read the question above; the answer keys work in a moment")}`])
        return
      }
      const opts = choices.map(([k, label], i) => (i === selected ? s.inverse(`[${k}] ${label}`) : `[${k}] ${label}`))
      screen.setFooter([
        `${s.yellow("?")} ${opts.join("  ")}`,
        s.dim(
          gate.dropped > 0
            ? `${gate.dropped} key${gate.dropped === 1 ? "" : "s"} typed before the question ignored`
            : "←/→ enter, or a letter · trusted folders are kept in ~/.config/muse/trusted.json"
        )
      ])
    }
    let pasting = false
    const done = (answer: TrustAnswer) => {
      gate.dispose()
      screen.setFooter([])
      const said =
        answer === "trust"
          ? s.green("  ⎿ trusted (muse asks again when these files change; undo: muse trust --revoke)")
          : answer === "once"
            ? s.green("  ⎿ trusted for this session")
            : answer === "no"
              ? s.dim("  ⎿ not trusted: this session uses your own settings only")
              : s.dim("  ⎿ cancelled")
      screen.print([said, ""])
      resolve(answer)
    }
    listen((str, key) => {
      if (key.name === "paste-start" || key.name === "paste-end") {
        pasting = key.name === "paste-start"
        return
      }
      if (key.ctrl && (key.name === "c" || key.name === "d")) return done("quit")
      if (pasting || !gate.take()) return draw()
      if (key.name === "left") selected = (selected + choices.length - 1) % choices.length
      else if (key.name === "right" || key.name === "tab") selected = (selected + 1) % choices.length
      else if (key.name === "return" || key.name === "enter") return done(choices[selected]![2])
      else if (str) {
        const c = choices.find(([k]) => k === str.toLowerCase())
        if (c) return done(c[2])
      }
      draw()
    })
    gate.arm()
    draw()
  })

/** Run the interactive UI until the user leaves; returns the exit code. */
export const runInteractive = (options: InteractiveOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const resuming = options.resume !== undefined
    const stdin = options.stdin
    // the model's retries (429, 5xx, a lost connection) reach the status line, once there is one
    let onRetry: ((retry: Model.Retry) => void) | undefined
    const env: Session.Env = { ...options.env, onRetry: (retry) => onRetry?.(retry) }
    const style = styleFor(options.stdout)
    // keys typed while muse starts are kept for the prompt; a question drawn meanwhile never takes them
    const early: Array<[string | undefined, Key]> = []
    let handler: KeyHandler = (str, key) => {
      if (early.length < 4096) early.push([str, key])
    }
    const keys: Array<KeyHandler> = []
    const onKey = (str: string | undefined, key: Key | undefined) => {
      try {
        ;(keys[keys.length - 1] ?? handler)(str, key ?? { sequence: str })
      } catch (e) {
        options.stdout.write(`internal error: ${escapeUnsafe((e as Error).message)}\r\n`)
      }
    }
    readline.emitKeypressEvents(stdin)
    stdin.setRawMode?.(true)
    stdin.resume()
    options.stdout.write("\x1b[?2004h")
    stdin.on("keypress", onKey)
    let restored = false
    const restoreTerminal = Effect.sync(() => {
      if (restored) return
      restored = true
      stdin.off("keypress", onKey)
      stdin.setRawMode?.(false)
      stdin.pause()
      options.stdout.write("\x1b[?2004l\x1b[?25h")
    })

    // the folder's own settings: asked about once, before they could take effect
    let trustState:
      | {
          readonly decision: Session.TrustDecision
          readonly recorded: boolean
          readonly rulesAtStart: ReadonlyArray<unknown>
        }
      | undefined
    let quit = false
    const decide: Session.Decide = (root) =>
      Effect.gen(function* () {
        const { project, status } = Session.projectTrust(root, options.env)
        let trusted = status._tag === "trusted"
        let recorded = trusted
        if (!trusted && status._tag !== "nothing") {
          if (options.flags.trust) trusted = true
          else {
            const answer = yield* Effect.promise(() =>
              askTrust(options.stdout, style, { project, status }, (h) => keys.push(h))
            )
            keys.pop()
            if (answer === "quit") quit = true
            if (answer === "trust") {
              yield* Trust.record(project, options.env.env)
              recorded = true
            }
            trusted = answer === "trust" || answer === "once"
          }
        }
        const rulesAtStart = trusted
          ? yield* SessionRuntime.loadProjectRules(root).pipe(Effect.orElseSucceed(() => []))
          : []
        const decision = { project, status, trusted }
        trustState = { decision, recorded, rulesAtStart }
        return decision
      })

    const started = yield* Effect.either(
      Effect.gen(function* () {
        if (options.resume) {
          const session =
            options.resume.session ??
            (yield* Session.latestSession((yield* Session.storeFor(options.flags, options.env)).store))
          const prepared = yield* Session.prepareResume(session, options.flags, env, decide)
          // the whole session, for the cost so far and the transcript's last lines
          const past = (yield* Session.readRecorded(session, prepared.store)).events
          return { session, prepared: prepared as Session.Prepared, past }
        }
        const session = EventLogFile.newSessionId()
        const prepared = yield* Session.prepareNew(options.flags, env, session, "", decide)
        return { session, prepared, past: [] as ReadonlyArray<Event.Envelope> }
      })
    )
    if (started._tag === "Left" || quit) {
      yield* restoreTerminal
      if (started._tag === "Left") return yield* Effect.fail(started.left)
      return ExitCode.Interrupted
    }
    const { session, prepared, past } = started.right
    /** Rules the user saved with "yes, always" in this session (what core stores for such an answer). */
    const savedRules: Array<unknown> = []
    const app = new App(options.stdout, session, prepared.config, prepared.modelSource, prepared.plugins.skills)
    const mcp = prepared.plugins.mcp
    if (mcp) {
      // server names, versions, errors and tool names come from the servers: shown as data
      app.mcpLines = () => Mcp.statusLines(mcp.servers, mcp.discovery, app.style, (t) => escapeUnsafe(t, app.style))
    }
    app.rewinder = {
      turns: () =>
        Effect.runPromise(
          prepared.store.read(session).pipe(
            Effect.map((events) => Rewind.turns(events)),
            Effect.orElseSucceed(() => [])
          )
        ),
      changed: (spec) =>
        Effect.runPromise(
          prepared.store.read(session).pipe(
            Effect.flatMap((events) => SessionRuntime.planRewind(events, spec)),
            Effect.map((r) => ({
              files: r.changed.map((f) => (f.agent === "main" ? f.path : `${f.agent}:${f.path}`))
            })),
            Effect.catchAll((e) => Effect.succeed({ error: e.message }))
          )
        )
    }
    handler = (str, key) => app.onKey(str, key)
    for (const [str, key] of early.splice(0)) app.onKey(str, key)
    if (trustState) {
      const t = trustState
      const nothing = t.decision.status._tag === "nothing"
      app.alwaysOk = t.decision.trusted || nothing
      if (t.recorded || nothing) {
        const baseline = nothing ? {} : Trust.fingerprint(t.decision.project)
        app.onAlwaysSaved = () => {
          Trust.acceptSavedRules({
            root: t.decision.project.root,
            baseline,
            rulesAtStart: t.rulesAtStart,
            saved: savedRules,
            env: options.env.env
          })
        }
      }
    }
    onRetry = (retry) => {
      app.retrying = {
        until: Date.now() + retry.delayMs,
        reason: retry.reason,
        attempt: retry.attempt,
        of: retry.maxRetries
      }
      app.draw()
    }
    const onResize = () => {
      app.screen.redraw()
      app.draw()
    }
    options.stdout.on("resize", onResize)
    const onSigint = () => app.onKey(undefined, { name: "c", ctrl: true })
    process.on("SIGINT", onSigint)
    // SIGTERM: stop what runs, save, and leave
    let terminated = false
    const onSigterm = () => {
      terminated = true
      app.exitRequested = true
      app.cancel?.("stopped by SIGTERM")
      app.finishInputIfWaiting()
    }
    process.on("SIGTERM", onSigterm)
    const stop = yield* Stop.make

    if (past.length > 0) {
      const lines: Array<string> = []
      // the last screenfuls are enough (a day-long session has far more lines than anyone scrolls)
      History.printTranscript(past.slice(-400), {
        write: (t) => lines.push(...t.replace(/\n$/, "").split("\n")),
        style: app.style,
        columns: app.screen.columns
      })
      const shown = lines.slice(-40)
      if (past.length > 400) shown.unshift(app.style.dim(`… earlier lines: muse replay ${session}`))
      else if (lines.length > shown.length)
        shown.unshift(app.style.dim(`… ${lines.length - shown.length} earlier lines (muse replay ${session})`))
      app.screen.print(shown)
      for (const e of past) {
        app.totals.add(e)
        app.trackCrew(e, e.data ?? {})
      }
    }
    app.screen.print(welcome(app, prepared, session, resuming))

    const telemetry = yield* Telemetry.start(yield* Telemetry.settings(prepared.loaded, options.env.env), {
      session,
      model: prepared.config.model,
      command: "interactive",
      resuming
    })
    const io: SessionRuntime.Io = telemetry.wrap({
      input: Effect.map(
        Effect.promise(() => app.nextInput()),
        (t) => (t === undefined ? Option.none() : Option.some(t))
      ),
      stop,
      prompter: {
        ask: (request) =>
          Effect.async<Approvals.Answer>((resume) => {
            app.askApproval(request, (a) => {
              if (a.allow && a.scope === "project") {
                // what the answer stores: the confirmed rule (or, where a store keeps the call's summary, that)
                if (a.rule) savedRules.push({ ...a.rule, scope: "project" })
                savedRules.push({ tool: request.tool, pattern: request.summary, action: "allow", scope: "project" })
              }
              resume(Effect.succeed(a))
            })
            return Effect.sync(() => {
              if (app.state._tag === "approval") app.state = { _tag: "busy" }
            })
          })
      },
      onText: (agent, delta) => Effect.sync(() => (agent === "main" ? app.text(delta) : undefined)),
      onToolOutput: (_callId, chunk) => Effect.sync(() => app.toolOutput(chunk)),
      onEvent: (e) => Effect.sync(() => app.onEvent(e)),
      onResume: (info) =>
        Effect.sync(() => {
          if (info.ignored)
            app.print([`checkpoint not used (${escapeUnsafe(info.ignored, app.style)}); replaying the whole log`])
        }),
      output: (text) =>
        Effect.sync(() => {
          app.lastOutput = text
          app.print([...escapeUnsafe(text.replace(/\n$/, ""), app.style, { newlines: true }).split("\n"), ""])
        })
    })
    const services = (events: ReadonlyArray<Event.Envelope>): SessionRuntime.Services => ({
      languageModel: prepared.languageModel,
      plugins: prepared.plugins.plugins,
      tools: Tools.make(events),
      sandbox: {
        ...prepared.sandboxOptions,
        built: (service) => {
          app.sandbox = service
        }
      }
    })

    let code: number = ExitCode.Success
    let failure: string | undefined
    app.setBusy(resuming ? "resuming" : "starting")
    const recorded = resuming ? yield* prepared.store.read(session).pipe(Effect.orElseSucceed(() => [])) : []
    app.replayedBelow = recorded.length
    const program = resuming
      ? SessionRuntime.resume({ session, io, services: services(recorded), store: prepared.store })
      : SessionRuntime.start({ config: prepared.config, session, io, services: services([]), store: prepared.store })
    const fiber = yield* Effect.fork(program as Effect.Effect<unknown, unknown>)
    // Ctrl-C presses the session's stop button: the main agent's turn and every crew member's end,
    // and the session asks for the next input; reports that come later wait for it
    app.cancel = (reason) => Effect.runFork(stop.request(reason))
    app.hardExit = () => Effect.runFork(Fiber.interrupt(fiber))
    const exit = yield* Fiber.await(fiber)
    app.cancel = undefined
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
      const err = Cause.squash(exit.cause) as any
      failure =
        err?._tag === "SessionLocked"
          ? `session ${session} is in use by process ${err.pid}`
          : (err?.message ?? String(err))
      code = ExitCode.Failed
    } else if (terminated) code = ExitCode.Terminated
    yield* prepared.plugins.close
    options.stdout.off("resize", onResize)
    process.off("SIGINT", onSigint)
    process.off("SIGTERM", onSigterm)
    app.gate.dispose()
    yield* restoreTerminal
    const s = app.style
    app.close([
      ...(failure ? [s.red(`muse: ${escapeUnsafe(failure, s)}`)] : []),
      s.dim(`${app.totals.describe()} · session ${session}`),
      s.dim(`continue it with: muse resume ${session}`)
    ])
    return code
  }).pipe(Effect.scoped)
