/**
 * The interactive terminal UI of `muse`, composed from parts: the transcript (streamed text and
 * what each event adds), the crew panel, the status line, approval questions, muse's own questions,
 * the prompt's editor and the slash-command registry. This class holds the UI's state (idle at the
 * prompt, busy, asking) and sends each key to the part that owns it. Ctrl-C cancels the running
 * turn (the session goes on); Ctrl-C twice, Ctrl-D or /exit leave. `run.ts` connects it to a
 * session.
 *
 * @example
 * ```ts
 * const app = new App(process.stdout, session, config, "--model", skills)
 * app.askApproval(request, (answer) => …)
 * app.onKey(str, key)
 * ```
 */
import type { Approvals, Event } from "@musekit/core"
import type { Sandbox, SessionRuntime } from "@musekit/node"
import { Effect } from "effect"
import { escapeOutput, escapeUnsafe, type Style, styleFor } from "../ansi.js"
import * as Render from "../render.js"
import * as Approval from "./approvals.js"
import { builtinCommands } from "./builtins.js"
import { Registry, type SlashCommand } from "./commands.js"
import { CrewView } from "./crewPanel.js"
import { Editor, type Key } from "./editor.js"
import { Gate } from "./gate.js"
import * as Info from "./info.js"
import * as Menu from "./menu.js"
import { pickRewind, type Rewinder } from "./rewindPicker.js"
import { Screen } from "./screen.js"
import { type Activity, busyLines, type Retrying, statusLine } from "./statusLine.js"
import { Transcript } from "./transcript.js"

type State = { readonly _tag: "idle" } | Menu.State | { readonly _tag: "busy" } | Approval.State

export class App {
  readonly screen: Screen
  readonly style: Style
  readonly editor: Editor
  readonly commands = new Registry()
  state: State = { _tag: "busy" }
  private readonly transcript: Transcript
  private readonly approvals: Approval.ApprovalPrompt
  private spinnerFrame = 0
  private spinner: ReturnType<typeof setInterval> | undefined
  private busySince = 0
  private activity: Activity | undefined
  private lastCtrlC = 0
  /** What the spinner says when no tool runs. */
  phase = "starting"
  private hint: string | undefined
  private inputWaiter: ((text: string | undefined) => void) | undefined
  private typeAhead: Array<[string | undefined, Key]> = []
  private pasting = false
  readonly totals = new Render.Totals()
  readonly crew = new CrewView()
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
  retrying: Retrying | undefined
  /** Whether "yes, always" is offered (its rule is saved where it takes effect again). */
  alwaysOk = false
  /** Told after a "yes, always" rule was saved. */
  onAlwaysSaved: (() => void) | undefined
  /** Answer keys work only once a question has been on screen for a moment. */
  readonly gate = new Gate(() => this.draw())
  /** For `/rewind`: the session's turns, and the files someone else changed since a point. */
  rewinder: Rewinder | undefined
  /** Lines for `/mcp` (the session's MCP servers now). */
  mcpLines: (() => Effect.Effect<Array<string>>) | undefined
  /** More lines for `/status`: what the session read from where. */
  statusExtra: ReadonlyArray<string> = []

  constructor(
    readonly out: NodeJS.WriteStream,
    readonly session: string,
    readonly config: SessionRuntime.Config,
    readonly modelSource: string,
    skills: ReadonlyArray<{ readonly name: string; readonly description: string; readonly source?: string }>
  ) {
    const app = this
    this.style = styleFor(out)
    this.screen = new Screen(out, this.style)
    this.approvalMode = config.approvalMode
    this.sandboxMode = config.sandbox?.mode ?? "workspace-write"
    this.transcript = new Transcript(this.screen, this.style)
    this.editor = new Editor((text) => this.completions(text))
    this.approvals = new Approval.ApprovalPrompt({
      style: this.style,
      screen: this.screen,
      editor: this.editor,
      gate: this.gate,
      get alwaysOk() {
        return app.alwaysOk
      },
      statusLine: () => this.statusLine(),
      draw: () => this.draw(),
      answered: () => this.setBusy()
    })
    for (const c of builtinCommands(this.builtinHost())) this.commands.register(c)
    for (const k of skills)
      this.commands.register({ name: k.name, description: k.description, source: k.source ?? "a plugin" })
  }

  private builtinHost() {
    const app = this
    return {
      style: this.style,
      print: (lines: ReadonlyArray<string>) => this.print(lines),
      helpLines: () => this.helpLines(),
      crewLines: () => this.crew.panel(this.style, this.config.crew),
      modelLines: () => Info.modelLines(this.style, this.config.model, this.modelSource, this.totals),
      statusLines: () => this.statusLines(),
      mcpLines: () => (this.mcpLines ? Effect.runSync(this.mcpLines()) : ["no MCP servers in this session."]),
      get approvalMode() {
        return app.approvalMode
      },
      set approvalMode(m: string) {
        app.approvalMode = m
      },
      get sandboxMode() {
        return app.sandboxMode
      },
      set sandboxMode(m: Sandbox.Mode) {
        app.sandboxMode = m
      },
      clearScreen: () => {
        this.out.write("\x1b[2J\x1b[3J\x1b[H")
        this.draw()
      },
      leave: () => this.finishInput(undefined),
      rewind: (typed: string) => {
        const rewinder = this.rewinder
        if (!rewinder) return false
        pickRewind(this.pickerHost(), typed, rewinder).catch((e) => {
          this.print([this.style.yellow(`rewind: ${escapeUnsafe(String(e?.message ?? e), this.style)}`), ""])
          this.backToIdle()
        })
        return true
      }
    }
  }

  private pickerHost() {
    return {
      style: this.style,
      print: (lines: ReadonlyArray<string>) => this.print(lines),
      ask: (lines: ReadonlyArray<string>, prompt: string, choices: ReadonlyArray<Menu.MenuChoice>, inline: boolean) =>
        this.ask(lines, prompt, choices, inline),
      busy: () => {
        this.state = { _tag: "busy" }
      },
      backToIdle: () => this.backToIdle(),
      send: (text: string) => this.finishInput(text)
    }
  }

  /** Add a command (a plugin's, a Markdown file's); the reason when its name is taken. */
  register(command: SlashCommand): string | undefined {
    return this.commands.register(command)
  }

  commandNames(): Array<string> {
    return this.commands.names()
  }

  completions(text: string): ReadonlyArray<string> {
    return this.commands.completions(text)
  }

  // ----------------------------------------------------------------------------------- drawing

  private statusLine(): string {
    return statusLine(this.style, {
      model: this.config.model,
      approvalMode: this.approvalMode,
      crewEnabled: this.config.crew,
      crew: this.crew,
      totals: this.totals
    })
  }

  draw(): void {
    const s = this.style
    const w = this.screen.lineWidth
    const st = this.state
    const lines: Array<string> = this.transcript.partialLines()
    if (st._tag === "busy") {
      const retry = this.retrying
      if (retry && Math.ceil((retry.until - Date.now()) / 1000) <= 0) this.retrying = undefined
      lines.push(
        ...busyLines(s, {
          frame: this.spinnerFrame,
          width: w,
          phase: this.phase,
          busySince: this.busySince,
          activity: this.activity,
          retrying: retry
        })
      )
      lines.push(...this.crew.busyLines(s, w))
      lines.push(this.statusLine() + s.dim(" · ctrl-c cancels"))
      this.screen.setFooter(lines)
      return
    }
    if (st._tag === "approval") {
      const cursor = this.approvals.footer(st, lines)
      this.screen.setFooter(lines, cursor)
      return
    }
    if (st._tag === "menu") {
      Menu.footer(st, s, this.gate, this.statusLine(), lines)
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
    this.transcript.text(delta)
    this.draw()
  }

  flushText(): void {
    this.transcript.flush()
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
    this.crew.track(e, data)
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
      this.print([this.transcript.answerLine(data)])
      if (data.allow && data.scope === "project") this.onAlwaysSaved?.()
      return
    }
    // a diff the question showed is not shown again: its stat line says it was applied
    const diffSeen = e.type === "tool.completed" && this.diffShown.delete(`${e.agent}\u0000${data.callId}`)
    const lines = this.transcript.eventLines(e, { diffSeen })
    if (lines.length > 0) this.print(lines)
    else this.draw()
  }

  toolOutput(chunk: string): void {
    if (!this.activity) return
    const lines = chunk.split("\n").filter((l) => l.trim() !== "")
    if (lines.length > 0) this.activity.output = escapeOutput(lines[lines.length - 1]!, this.style)
    this.draw()
  }

  helpLines(): Array<string> {
    return Info.helpLines(this.style, this.commands.list())
  }

  sandboxStatus(): Sandbox.Status {
    return Info.sandboxStatus(this.sandbox, this.sandboxMode, this.config.sandbox)
  }

  statusLines(): Array<string> {
    return Info.statusLines(this.style, {
      session: this.session,
      root: this.config.root,
      model: this.config.model,
      approvalMode: this.approvalMode,
      sandbox: this.sandboxStatus(),
      extra: this.statusExtra
    })
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
      const [name, ...rest] = t.slice(1).split(/\s+/)
      const command = this.commands.get(name ?? "")
      if (!command) {
        this.print([
          s.cyan(`› ${shown}`),
          s.yellow(`unknown command /${escapeUnsafe(name ?? "", s)}; /help lists them`),
          ""
        ])
        return
      }
      if (command.run && command.run({ arg: rest.join(" "), typed: t, shown }) === "done") return
    }
    this.print([s.bold(s.cyan(`› ${shown}`)), ""])
    this.finishInput(t)
  }

  /** Ask a question of muse itself; `undefined` when the person cancels it (esc, ctrl-c). */
  private ask(
    lines: ReadonlyArray<string>,
    prompt: string,
    choices: ReadonlyArray<Menu.MenuChoice>,
    inline: boolean
  ): Promise<string | undefined> {
    this.screen.print(lines)
    return new Promise((resolve) => {
      this.state = Menu.open(prompt, choices, inline, (v) => {
        this.state = { _tag: "busy" }
        resolve(v)
      })
      this.gate.arm()
      this.draw()
    })
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

  /** Ask about a tool call (see `approvals.ts`). */
  askApproval(request: Approvals.Request, resolve: (a: Approvals.Answer) => void): void {
    this.flushText()
    this.stopSpinner()
    const lines = Approval.questionLines(request, this.style, {
      lastOutput: this.lastOutput,
      showsDiff: () => {
        const callId = this.asking.get(request.agent)
        if (callId !== undefined) this.diffShown.add(`${request.agent}\u0000${callId}`)
      }
    })
    this.state = this.approvals.open(request, lines, resolve)
    this.gate.arm()
    this.draw()
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
        if (this.editor.text === "") this.finishInput(undefined)
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
      Menu.key(st, str, key, { gate: this.gate, pasting: this.pasting, draw: () => this.draw() })
      return
    }
    if (st._tag === "approval") {
      this.approvals.key(st, str, key, this.pasting)
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
