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
import type { Approvals, Event } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { type Style, styleFor, truncate } from "../ansi.js"
import { type CliError, ExitCode } from "../exit.js"
import * as History from "../history.js"
import * as ModelInfo from "../modelInfo.js"
import * as Render from "../render.js"
import * as Session from "../session.js"
import * as Tools from "../tools.js"
import { version } from "../version.js"
import { Editor, type Key } from "./editor.js"
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
}

type State =
  | { readonly _tag: "idle" }
  | { readonly _tag: "busy" }
  | {
      readonly _tag: "approval"
      readonly request: Approvals.Request
      readonly choices: ReadonlyArray<Choice>
      selected: number
      text: { readonly prompt: string; readonly answer: (text: string) => Approvals.Answer } | undefined
      readonly resolve: (a: Approvals.Answer) => void
    }

const LOCAL_COMMANDS: ReadonlyArray<{ readonly name: string; readonly description: string }> = [
  { name: "agents", description: "the crew: members, status, current task" },
  { name: "approve", description: "set the approval mode: /approve read-only|ask|auto-edit|auto" },
  { name: "model", description: "the model, its window and price, tokens and cost so far" },
  { name: "help", description: "this help" },
  { name: "clear", description: "clear the screen" },
  { name: "exit", description: "leave (the session is saved; muse resume continues it)" }
]

const toolChoices = (request: Approvals.Request): ReadonlyArray<Choice> =>
  request.tool === "/plan"
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
        { key: "s", label: "yes, this session", answer: { allow: true, scope: "session" } },
        { key: "a", label: "yes, always", answer: { allow: true, scope: "project" } },
        { key: "n", label: "no", answer: { allow: false, scope: "once", reason: "the user said no" } },
        {
          key: "t",
          label: "no, tell why…",
          withText: { prompt: "tell the agent › ", answer: (t) => ({ allow: false, scope: "once", reason: t }) }
        }
      ]

class App {
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
  exitRequested = false
  cancel: (() => void) | undefined
  hardExit: (() => void) | undefined

  constructor(
    readonly out: NodeJS.WriteStream,
    readonly session: string,
    readonly config: SessionRuntime.Config,
    readonly modelSource: string,
    readonly skills: ReadonlyArray<{ readonly name: string; readonly description: string }>
  ) {
    this.screen = new Screen(out)
    this.style = styleFor(out)
    this.approvalMode = config.approvalMode
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
      const label = act ? act.label : this.phase
      const elapsed = Render.fmtDuration(now - (act ? act.since : this.busySince))
      lines.push(truncate(`${frame} ${label} ${s.dim(`· ${elapsed}`)}`, w))
      if (act?.output) lines.push(truncate(s.dim(`  ${act.output}`), w))
      for (const [name, m] of this.crew) {
        if (m.status === "working" || m.status === "waiting-approval") {
          lines.push(
            truncate(s.dim(`  ${s.magenta(name)} ${m.status}${m.task ? `: ${m.task.replace(/\s+/g, " ")}` : ""}`), w)
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
      const opts = st.choices
        .map((c, i) => {
          const text = `[${c.key}] ${c.label}`
          return i === st.selected ? s.inverse(text) : text
        })
        .join("  ")
      lines.push(`${s.yellow("?")} ${opts}`)
      lines.push(this.statusLine() + s.dim(" · ←/→ enter, or a letter"))
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
    this.partial += delta
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
    if (e.type === "model.requested" && e.agent === "main") {
      this.activity = undefined
      this.phase = "thinking"
    }
    if (e.type === "tool.started" && e.agent === "main") {
      this.flushText()
      this.activity = {
        label: Render.toolTitle(String(data.tool ?? ""), data.summary),
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
        : `denied${data.reason ? `: ${data.reason}` : ""}`
      this.print([`  ${data.allow ? this.style.green(`⎿ ${how}`) : this.style.red(`⎿ ${how}`)}`])
      return
    }
    const lines = Render.eventLines(e, {
      style: this.style,
      columns: this.screen.columns,
      mainText: false,
      transcript: false,
      maxDiffLines: 40
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
    if (lines.length > 0) this.activity.output = lines[lines.length - 1]!.replace(/\x1b\[[0-9;]*m/g, "")
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
        `  ${s.magenta(name.padEnd(12))} ${m.role.padEnd(9)} ${color(m.status.padEnd(16))} ${s.dim(`${m.tasks} task${m.tasks === 1 ? "" : "s"}`)}${m.task ? `  ${m.task}` : ""}`
      )
    }
    return lines
  }

  helpLines(): Array<string> {
    const s = this.style
    const rows: Array<[string, string]> = [
      ...this.skills.map((k): [string, string] => [`/${k.name}`, k.description.split(". ")[0]!]),
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

  modelLines(): Array<string> {
    const s = this.style
    const info = ModelInfo.lookup(this.config.model)
    const price = info?.pricing
      ? `$${info.pricing.input}/$${info.pricing.output} per million tokens in/out`
      : "no list price known"
    return [
      `${s.bold(this.config.model)} ${s.dim(`(from ${this.modelSource})`)}`,
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
    if (t.startsWith("/")) {
      const [cmd, ...rest] = t.slice(1).split(/\s+/)
      const arg = rest.join(" ")
      switch (cmd) {
        case "help":
          this.print([s.cyan(`› ${t}`), ...this.helpLines(), ""])
          return
        case "agents":
          this.print([s.cyan(`› ${t}`), ...this.crewPanel(), ""])
          return
        case "model":
          this.print([s.cyan(`› ${t}`), ...this.modelLines(), ""])
          return
        case "clear":
          this.out.write("\x1b[2J\x1b[3J\x1b[H")
          this.draw()
          return
        case "exit":
        case "quit":
          this.finishInput(undefined)
          return
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
            this.print([s.cyan(`› ${t}`), s.yellow(`unknown command /${cmd}; /help lists them`), ""])
            return
          }
      }
    }
    this.print([s.bold(s.cyan(`› ${t}`)), ""])
    this.finishInput(t)
  }

  private finishInput(text: string | undefined): void {
    const w = this.inputWaiter
    this.inputWaiter = undefined
    if (text === undefined) this.exitRequested = true
    else this.setBusy()
    w?.(text)
  }

  askApproval(request: Approvals.Request, resolve: (a: Approvals.Answer) => void): void {
    this.flushText()
    this.stopSpinner()
    const s = this.style
    const who = `${s.magenta(request.agent)} `
    const head =
      request.tool === "/plan"
        ? `${s.yellow("?")} ${who}approve the plan: ${s.bold(request.summary)}`
        : `${s.yellow("?")} ${who}wants to ${request.effect === "exec" ? "run" : request.effect === "write" ? "change a file" : "use"}: ${s.bold(Render.toolTitle(request.tool, request.summary))}`
    const preview = request.preview
      ? request.tool === "/plan"
        ? request.preview.split("\n").map((l) => `  ${l}`)
        : Render.diffLines(request.preview, s, 40).map((l) => `  ${l}`)
      : []
    this.screen.print([head, ...preview])
    this.state = { _tag: "approval", request, choices: toolChoices(request), selected: 0, text: undefined, resolve }
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
      const pick = (c: Choice) => {
        if (c.withText) {
          st.text = c.withText
          this.editor.clear()
          return this.draw()
        }
        if (c.answer) this.answer(c.answer)
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
    this.print([this.style.yellow("■ cancelling… (ctrl-c again to exit)")])
    this.cancel?.()
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
    `${s.bold("muse")} ${s.dim(version())} · ${s.cyan(prepared.config.model)} · ${root}`,
    s.dim(
      `${resumed ? "resumed" : "session"} ${session} · approvals ${prepared.config.approvalMode} · crew ${prepared.config.crew ? "on" : "off"}`
    ),
    s.dim("Type a task, or /help. Ctrl-C cancels a turn, Ctrl-D exits."),
    ...prepared.plugins.warnings.map((w) => s.yellow(`! ${w}`)),
    ""
  ]
}

/** Run the interactive UI until the user leaves; returns the exit code. */
export const runInteractive = (options: InteractiveOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const resuming = options.resume !== undefined
    let session: string
    let prepared: Session.Prepared
    let past: ReadonlyArray<Event.Envelope> = []
    if (options.resume) {
      const dir = yield* Session.stateDirFor(options.flags, options.env)
      session = options.resume.session ?? (yield* Session.latestSession(dir))
      prepared = yield* Session.prepareResume(session, options.flags, options.env)
      // the whole session, for the cost so far and the transcript's last lines
      past = (yield* Session.readRecorded(session, prepared.stateDir)).events
    } else {
      session = EventLogFile.newSessionId()
      prepared = yield* Session.prepareNew(options.flags, options.env, session)
    }
    const app = new App(options.stdout, session, prepared.config, prepared.modelSource, prepared.plugins.skills)
    const stdin = options.stdin
    readline.emitKeypressEvents(stdin)
    stdin.setRawMode?.(true)
    stdin.resume()
    options.stdout.write("\x1b[?2004h")
    const onKey = (str: string | undefined, key: Key | undefined) => {
      try {
        app.onKey(str, key ?? { sequence: str })
      } catch (e) {
        app.print([app.style.red(`internal error: ${(e as Error).message}`)])
      }
    }
    stdin.on("keypress", onKey)
    const onResize = () => app.screen.redraw()
    options.stdout.on("resize", onResize)
    const onSigint = () => app.onKey(undefined, { name: "c", ctrl: true })
    process.on("SIGINT", onSigint)

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

    const io: SessionRuntime.Io = {
      input: Effect.map(
        Effect.promise(() => app.nextInput()),
        (t) => (t === undefined ? Option.none() : Option.some(t))
      ),
      prompter: {
        ask: (request) =>
          Effect.async<Approvals.Answer>((resume) => {
            app.askApproval(request, (a) => resume(Effect.succeed(a)))
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
          if (info.ignored) app.print([`checkpoint not used (${info.ignored}); replaying the whole log`])
        }),
      output: (text) => Effect.sync(() => app.print([...text.replace(/\n$/, "").split("\n"), ""]))
    }
    const services = (events: ReadonlyArray<Event.Envelope>): SessionRuntime.Services => ({
      languageModel: prepared.languageModel,
      plugins: prepared.plugins.plugins,
      tools: Tools.make(events)
    })

    let mode: "start" | "resume" = resuming ? "resume" : "start"
    let code: number = ExitCode.Success
    let failure: string | undefined
    app.setBusy(resuming ? "resuming" : "starting")
    while (true) {
      const recorded =
        mode === "start"
          ? []
          : yield* EventLogFile.readSession(session, { dir: prepared.stateDir }).pipe(Effect.orElseSucceed(() => []))
      app.replayedBelow = recorded.length
      const program =
        mode === "start"
          ? SessionRuntime.start({
              config: prepared.config,
              session,
              io,
              services: services([]),
              dir: prepared.stateDir
            })
          : SessionRuntime.resume({ session, io, services: services(recorded), dir: prepared.stateDir })
      const fiber = yield* Effect.fork(program as Effect.Effect<unknown, unknown>)
      let cancelled = false
      app.cancel = () => {
        cancelled = true
        Effect.runFork(Fiber.interrupt(fiber))
      }
      app.hardExit = () => {
        cancelled = false
        Effect.runFork(Fiber.interrupt(fiber))
      }
      const exit = yield* Fiber.await(fiber)
      app.cancel = undefined
      if (cancelled && !app.exitRequested) {
        mode = "resume"
        app.setBusy("resuming")
        continue
      }
      if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
        const err = Cause.squash(exit.cause) as any
        failure =
          err?._tag === "SessionLocked"
            ? `session ${session} is in use by process ${err.pid}`
            : (err?.message ?? String(err))
        code = ExitCode.Failed
      }
      break
    }
    stdin.off("keypress", onKey)
    options.stdout.off("resize", onResize)
    process.off("SIGINT", onSigint)
    stdin.setRawMode?.(false)
    stdin.pause()
    options.stdout.write("\x1b[?2004l")
    const s = app.style
    app.close([
      ...(failure ? [s.red(`muse: ${failure}`)] : []),
      s.dim(`${app.totals.describe()} · session ${session}`),
      s.dim(`continue it with: muse resume ${session}`)
    ])
    return code
  })
