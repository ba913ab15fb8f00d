/**
 * `muse acp`: muse as an agent an editor hosts, over the Agent Client Protocol on stdio (stdout is
 * the protocol channel; notes go to stderr).
 *
 * Every ACP session is a normal muse session, recorded where the others are (the state directory,
 * or the database of `--log`): `muse sessions`
 * lists it, `muse resume` and `muse replay` take it, and `session/load` continues one (started in
 * the editor or not) after a stop or a crash. `session/prompt` is one user input; its answer streams
 * as `session/update`s — text, tool calls with their diffs, the plan of `/plan` — and the prompt
 * returns when the session waits for the next input. Approvals are `session/request_permission`;
 * `session/cancel` stops the turn (recorded as interrupted, as Ctrl-C in the terminal) and the
 * session is ready for the next prompt. MCP servers the editor hands over join those of muse's own
 * configuration. When the editor offers terminals and commands run without an OS sandbox (`--sandbox
 * off`, or none can run here), `run_shell` runs in one of them (the editor shows it live with the
 * tool call); in the sandbox it runs in muse. The model sees the same tool and result either way, so
 * the log replays the same.
 * When the editor offers its file system, `read_file` sees what the editor holds (a buffer with
 * unsaved changes included), a write or edit of a file whose buffer has unsaved changes is refused
 * with that reason (nothing the user typed is overwritten), and the editor is handed each file muse
 * wrote, so its buffers show the change. Writes themselves go to disk through muse, so a crashed
 * write is settled on resume like any other.
 *
 * @example
 * ```json
 * // Zed settings.json
 * { "agent_servers": { "muse": { "type": "custom", "command": "muse", "args": ["acp"] } } }
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Readable, Writable } from "node:stream"
import type * as acp from "@agentclientprotocol/sdk"
import { type Approvals, Tools as CoreTools, type Event } from "@musekit/core"
import { EventLogFile, Sandbox, SessionRuntime } from "@musekit/node"
import { Cause, Effect, Exit, Fiber, Option, Scope } from "effect"
import { noticeUpdate } from "./acpNotice.js"
import { plain } from "./ansi.js"
import { CliError, ExitCode } from "./exit.js"
import * as Mcp from "./mcp.js"
import * as Render from "./render.js"
import * as Session from "./session.js"
import * as Telemetry from "./telemetry.js"
import * as Tools from "./tools.js"
import { version } from "./version.js"

type Sdk = typeof import("@agentclientprotocol/sdk")

export interface Options {
  readonly flags: Session.Flags
  readonly env: Session.Env
  readonly stdin: NodeJS.ReadableStream
  readonly stdout: NodeJS.WritableStream
  readonly stderr: NodeJS.WritableStream
}

const textOf = (blocks: ReadonlyArray<acp.ContentBlock>): string => {
  const parts: Array<string> = []
  for (const b of blocks) {
    if (b.type === "text") parts.push(b.text)
    else if (b.type === "resource_link") parts.push(`@${b.uri.replace(/^file:\/\//, "")}`)
    else if (b.type === "resource") {
      const r = b.resource as { uri: string; text?: string }
      const where = r.uri.replace(/^file:\/\//, "")
      parts.push(typeof r.text === "string" ? `<file path="${where}">\n${r.text}\n</file>` : `@${where}`)
    }
  }
  return parts.join("\n")
}

const kindOf = (tool: string, effect?: string): acp.ToolKind => {
  switch (tool) {
    case "read_file":
      return "read"
    case "list_files":
    case "grep":
      return "search"
    case "write_file":
    case "edit_file":
    case "worktree_merge":
      return "edit"
    case "run_shell":
      return "execute"
  }
  if (tool.startsWith("mcp__")) return effect === "read" ? "read" : effect === "network" ? "fetch" : "execute"
  return "other"
}

const MAX_CONTENT = 16_000

const clip = (text: string) => (text.length > MAX_CONTENT ? `${text.slice(0, MAX_CONTENT)}\n… (cut)` : text)

const textContent = (text: string): acp.ToolCallContent => ({
  type: "content",
  content: { type: "text", text: clip(text) }
})

/** What a finished tool call shows in the editor. */
const resultContent = (data: any): Array<acp.ToolCallContent> => {
  const r = data.result
  if (data.blob) return [textContent(String(data.preview ?? ""))]
  if (data.isFailure) return [textContent(String(r && typeof r === "object" && "error" in r ? r.error : r))]
  if (r && typeof r === "object") {
    if (typeof r.diff === "string") return [textContent(r.diff)]
    if (typeof r.output === "string") return [textContent(r.output)]
    if (typeof r.text === "string") return [textContent(r.text)]
    if (typeof r.content === "string") return [textContent(r.content)]
  }
  if (typeof r === "string") return [textContent(r)]
  return r === undefined || r === null ? [] : [textContent(JSON.stringify(r, null, 2))]
}

/** A plan's steps as ACP plan entries. */
const planEntries = (
  steps: ReadonlyArray<{ id: string; intent: string }>,
  status: ReadonlyMap<string, acp.PlanEntryStatus>
): Array<acp.PlanEntry> =>
  steps.map((s) => ({ content: s.intent, priority: "medium", status: status.get(s.id) ?? "pending" }))

/**
 * Turns events into `session/update`s: tool calls (announced once, then updated), the plan, the
 * text of replayed turns. `live`: text arrives as deltas (`onText`), so replies are not resent.
 */
class Updates {
  private announced = new Set<string>()
  private steps: ReadonlyArray<{ id: string; intent: string }> = []
  private stepStatus = new Map<string, acp.PlanEntryStatus>()
  /** Text of a file a write tool is about to change (live), for the diff shown when it is done. */
  private before = new Map<string, { path: string; text: string | null }>()
  /** Calls that run in the editor's terminal: the terminal is their content. */
  readonly inTerminal = new Set<string>()

  constructor(
    private readonly root: string,
    private readonly send: (update: acp.SessionUpdate) => void
  ) {}

  private id(e: Event.Envelope, callId: string) {
    return e.agent === "main" ? callId : `${e.agent}/${callId}`
  }

  private title(e: Event.Envelope, tool: string, summary: unknown) {
    const t = Render.toolTitle(tool, summary, plain)
    return e.agent === "main" ? t : `${e.agent}: ${t}`
  }

  private readText(rel: string): string | null {
    try {
      return fs.readFileSync(path.resolve(this.root, rel), "utf8")
    } catch {
      return null
    }
  }

  event(e: Event.Envelope, live: boolean): void {
    const d = (e.data ?? {}) as any
    switch (e.type) {
      case "user.input":
        if (!live && e.agent === "main") {
          this.send({ sessionUpdate: "user_message_chunk", content: { type: "text", text: String(d.text ?? "") } })
        }
        return
      case "model.responded":
        if (!live && e.agent === "main" && typeof d.text === "string" && d.text !== "") {
          this.send({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: d.text } })
        }
        return
      case "approval.requested": {
        const id = this.id(e, d.callId)
        if (this.announced.has(id)) return
        this.announced.add(id)
        this.send({
          sessionUpdate: "tool_call",
          toolCallId: id,
          title: this.title(e, d.tool, d.summary),
          kind: kindOf(d.tool, d.effect),
          status: "pending"
        })
        return
      }
      case "approval.decided":
        if (d.allow || d.callId === undefined) return
        this.announce(e, d.callId, d.tool, d.summary, undefined, undefined)
        this.send({
          sessionUpdate: "tool_call_update",
          toolCallId: this.id(e, d.callId),
          status: "failed",
          content: [textContent(`denied${d.reason ? `: ${d.reason}` : d.rule ? ` by rule ${d.rule}` : ""}`)]
        })
        return
      case "tool.rejected":
        this.announce(e, d.callId, d.tool, d.tool, undefined, undefined)
        this.send({
          sessionUpdate: "tool_call_update",
          toolCallId: this.id(e, d.callId),
          status: "failed",
          content: [textContent(String(d.reason ?? "rejected"))]
        })
        return
      case "tool.started": {
        const params = d.params ?? {}
        const file = typeof params.path === "string" ? params.path : undefined
        if (live && file && (d.tool === "write_file" || d.tool === "edit_file")) {
          this.before.set(this.id(e, d.callId), { path: file, text: this.readText(file) })
        }
        const locations = file ? [{ path: path.resolve(this.root, file) }] : undefined
        if (this.announce(e, d.callId, d.tool, d.summary, d.effect, { params, locations })) return
        this.send({
          sessionUpdate: "tool_call_update",
          toolCallId: this.id(e, d.callId),
          status: "in_progress",
          rawInput: params,
          ...(locations ? { locations } : {})
        })
        return
      }
      case "tool.completed": {
        const id = this.id(e, d.callId)
        this.announce(e, d.callId, d.tool, d.tool, undefined, undefined)
        if (this.inTerminal.delete(id) && !d.isFailure) {
          this.send({ sessionUpdate: "tool_call_update", toolCallId: id, status: "completed" })
          return
        }
        let content = resultContent(d)
        const before = this.before.get(id)
        this.before.delete(id)
        if (before && !d.isFailure) {
          const after = this.readText(before.path)
          if (after !== null) {
            content = [
              { type: "diff", path: path.resolve(this.root, before.path), oldText: before.text, newText: after }
            ]
          }
        }
        this.send({
          sessionUpdate: "tool_call_update",
          toolCallId: id,
          status: d.isFailure ? "failed" : "completed",
          content
        })
        return
      }
      case "plan.proposed":
      case "plan.revised":
        if (d.plan && Array.isArray(d.plan.steps)) {
          this.steps = d.plan.steps
          this.stepStatus.clear()
          this.send({ sessionUpdate: "plan", entries: planEntries(this.steps, this.stepStatus) })
        }
        return
      case "plan.step.started":
      case "plan.step.completed": {
        const step = typeof d.step === "string" ? d.step : d.step?.id
        if (typeof step !== "string") return
        this.stepStatus.set(step, e.type === "plan.step.started" ? "in_progress" : "completed")
        this.send({ sessionUpdate: "plan", entries: planEntries(this.steps, this.stepStatus) })
        return
      }
      case "turn.completed":
        if (e.agent === "main" && d.status !== "completed" && d.reason) {
          this.send({
            sessionUpdate: "agent_message_chunk",
            content: { type: "text", text: `\n\n(${d.status}: ${d.reason})` }
          })
        }
        return
    }
  }

  /** A call asked about that the editor has not seen (a question still open when the session stopped). */
  pending(toolCallId: string, title: string, kind: acp.ToolKind): void {
    if (this.announced.has(toolCallId)) return
    this.announced.add(toolCallId)
    this.send({ sessionUpdate: "tool_call", toolCallId, title, kind, status: "pending" })
  }

  /** Send `tool_call` for a call the editor has not seen yet; `true` when it was sent now. */
  private announce(
    e: Event.Envelope,
    callId: string,
    tool: string,
    summary: unknown,
    effect: string | undefined,
    extra: { params: unknown; locations: Array<{ path: string }> | undefined } | undefined
  ): boolean {
    const id = this.id(e, callId)
    if (this.announced.has(id)) return false
    this.announced.add(id)
    this.send({
      sessionUpdate: "tool_call",
      toolCallId: id,
      title: this.title(e, tool, summary),
      kind: kindOf(tool, effect),
      status: "in_progress",
      ...(extra ? { rawInput: extra.params } : {}),
      ...(extra?.locations ? { locations: extra.locations } : {})
    })
    return true
  }
}

/** One ACP session: a muse session running in the background, fed by prompts. */
class Live {
  private queue: Array<string> = []
  private waiter: ((text: string | undefined) => void) | undefined
  /** The prompt being answered; `delivered` once the session took its text. */
  private turn: { resolve: (r: acp.PromptResponse) => void; stop: acp.StopReason; delivered: boolean } | undefined
  private ready: Array<() => void> = []
  private isReady = false
  private fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  private cancelling = false
  closed = false
  /** Callers waiting for the call id of the approval being asked. */
  readonly pendingApproval = new Map<string, string>()
  readonly updates: Updates
  /** Events before this seq were recorded before this run (history, sent on load if at all). */
  liveFrom = 0

  constructor(
    readonly id: string,
    readonly prepared: Session.Prepared,
    readonly client: acp.AgentContext,
    readonly note: (line: string) => void,
    /** The editor offers terminals: `run_shell` runs in one, shown with the tool call. */
    readonly terminal: boolean,
    /** What the session holds open while it lives (the log store's connections). */
    readonly scope: Scope.CloseableScope,
    /** The editor's file system: buffers are read from it, and written files are handed to it. */
    readonly editorFs: EditorFs = { read: false, write: false }
  ) {
    this.updates = new Updates(prepared.root, (update) => this.send(update))
  }

  send(update: acp.SessionUpdate): void {
    if (this.closed) return
    this.client.notify("session/update", { sessionId: this.id, update }).catch(() => {})
  }

  /** The session asks for its next input: the prompt before it is done. */
  private idle(): void {
    const turn = this.turn
    if (turn?.delivered) {
      this.turn = undefined
      turn.resolve({ stopReason: turn.stop })
    }
    if (!this.isReady) {
      this.isReady = true
      for (const r of this.ready.splice(0)) r()
    }
  }

  readonly input: Effect.Effect<Option.Option<string>> = Effect.async<Option.Option<string>>((resume) => {
    this.idle()
    if (this.closed) return resume(Effect.succeed(Option.none()))
    const next = this.queue.shift()
    if (next !== undefined) {
      if (this.turn) this.turn.delivered = true
      return resume(Effect.succeed(Option.some(next)))
    }
    this.waiter = (text) => resume(Effect.succeed(text === undefined ? Option.none() : Option.some(text)))
    return Effect.sync(() => {
      this.waiter = undefined
    })
  })

  /** Resolves once the session waits for its first input (a load has replayed and settled). */
  whenReady(): Promise<void> {
    return this.isReady ? Promise.resolve() : new Promise((r) => this.ready.push(r))
  }

  prompt(text: string): Promise<acp.PromptResponse> {
    if (this.turn) return Promise.reject(new Error("a prompt is already running in this session; cancel it first"))
    return new Promise((resolve) => {
      this.turn = { resolve, stop: "end_turn", delivered: false }
      const w = this.waiter
      this.waiter = undefined
      if (w) {
        this.turn.delivered = true
        w(text)
      } else this.queue.push(text)
    })
  }

  finished(result: { readonly status: string; readonly reason?: string | undefined }): void {
    if (!this.turn) return
    this.turn.stop =
      result.status === "interrupted"
        ? "cancelled"
        : result.status === "budget"
          ? /token/.test(result.reason ?? "")
            ? "max_tokens"
            : "max_turn_requests"
          : "end_turn"
  }

  cancel(): void {
    if (!this.turn || !this.fiber || this.cancelling) return
    this.cancelling = true
    this.turn.stop = "cancelled"
    Effect.runFork(Fiber.interrupt(this.fiber))
  }

  close(): void {
    this.closed = true
    const w = this.waiter
    this.waiter = undefined
    w?.(undefined)
    if (this.fiber) Effect.runFork(Fiber.interrupt(this.fiber))
  }

  /**
   * `run_shell` in a terminal of the editor: the same tool for the model (name, parameters, result),
   * run by the editor, which shows the command and its output live with the tool call.
   */
  shellInTerminal(def: CoreTools.Definition): CoreTools.Definition {
    return {
      ...def,
      handler: (params: { readonly command: string; readonly timeout_ms?: number | undefined }, ctx) =>
        Effect.tryPromise({
          try: (signal) => this.runInTerminal(params.command, params.timeout_ms, ctx, signal),
          catch: (e) => new CoreTools.ToolError({ message: `the editor's terminal failed: ${describeError(e)}` })
        })
    }
  }

  private async runInTerminal(
    command: string,
    requested: number | undefined,
    ctx: CoreTools.CallContext,
    signal: AbortSignal
  ) {
    // the limits of the coding tools' run_shell: 120 s by default, at most 10 min
    const timeoutMs = Math.min(requested ?? 120_000, 600_000)
    const terminal = await this.client.createTerminal({
      sessionId: this.id,
      command: "sh",
      args: ["-c", command],
      cwd: ctx.workspace.root,
      outputByteLimit: 64 * 1024
    })
    const toolCallId = ctx.agent === "main" ? ctx.callId : `${ctx.agent}/${ctx.callId}`
    this.updates.inTerminal.add(toolCallId)
    this.send({
      sessionUpdate: "tool_call_update",
      toolCallId,
      content: [{ type: "terminal", terminalId: terminal.id }]
    })
    let timedOut = false
    const kill = () => void terminal.kill().catch(() => {})
    const timer = setTimeout(() => {
      timedOut = true
      kill()
    }, timeoutMs)
    signal.addEventListener("abort", kill)
    try {
      const exit = await terminal.waitForExit()
      const out = await terminal.currentOutput()
      return {
        exit_code: exit.exitCode ?? null,
        output: out.truncated ? `[… earlier output cut]\n${out.output}` : out.output,
        timed_out: timedOut,
        ...(exit.signal ? { signal: exit.signal } : {}),
        ...(timedOut ? { note: `timed out after ${timeoutMs} ms; the command was killed` } : {})
      }
    } finally {
      clearTimeout(timer)
      signal.removeEventListener("abort", kill)
      await terminal.release().catch(() => {})
    }
  }

  /** The text the editor holds for a file (`undefined`: the editor has none, or could not say). */
  private async editorText(abs: string): Promise<string | undefined> {
    if (!this.editorFs.read) return undefined
    try {
      const r = await this.client.request("fs/read_text_file", { sessionId: this.id, path: abs })
      return typeof r?.content === "string" ? r.content : undefined
    } catch {
      return undefined
    }
  }

  /**
   * `read_file` through the editor: the same result as on disk, unless the editor's buffer holds
   * unsaved changes; then the lines are the buffer's, and a note says so.
   */
  readInEditor(def: CoreTools.Definition): CoreTools.Definition {
    const self = this
    return {
      ...def,
      handler: (params: ReadParams, ctx) =>
        Effect.gen(function* () {
          const fromDisk = (yield* def.handler(params, ctx)) as { readonly path: string }
          const abs = yield* Effect.orDie(ctx.workspace.resolve(params.path))
          const buffer = yield* Effect.promise(() => self.editorText(abs))
          if (buffer === undefined) return fromDisk
          const disk = yield* Effect.promise(() => fs.promises.readFile(abs, "utf8").catch(() => undefined))
          if (disk === buffer) return fromDisk
          return numberedFromBuffer(fromDisk.path, buffer, params.offset, params.limit)
        })
    }
  }

  /**
   * `write_file` / `edit_file` beside the editor: a file whose buffer has unsaved changes is not
   * written (the user's typing would be lost); after a write, the editor gets the new content.
   */
  writeBesideEditor(def: CoreTools.Definition): CoreTools.Definition {
    const self = this
    return {
      ...def,
      handler: (params: unknown, ctx) =>
        Effect.gen(function* () {
          const targets: Array<{ readonly rel: string; readonly abs: string }> = []
          for (const rel of def.paths(params)) {
            const abs = yield* Effect.either(ctx.workspace.resolve(rel))
            if (abs._tag === "Right") targets.push({ rel, abs: abs.right })
          }
          for (const t of targets) {
            const buffer = yield* Effect.promise(() => self.editorText(t.abs))
            if (buffer === undefined) continue
            const disk = yield* Effect.promise(() => fs.promises.readFile(t.abs, "utf8").catch(() => undefined))
            if (disk === buffer || (disk === undefined && buffer === "")) continue
            return yield* Effect.fail(
              new CoreTools.ToolError({
                message: `${t.rel} has unsaved changes in the editor; nothing was written. Ask the user to save or discard them, then read the file again.`
              })
            )
          }
          const result = yield* def.handler(params, ctx)
          if (self.editorFs.write) {
            for (const t of targets) {
              const now = yield* Effect.promise(() => fs.promises.readFile(t.abs, "utf8").catch(() => undefined))
              if (now === undefined) continue
              yield* Effect.promise(() =>
                self.client.request("fs/write_text_file", { sessionId: self.id, path: t.abs, content: now }).then(
                  () => undefined,
                  (e: unknown) => self.note(`the editor did not take the new ${t.rel}: ${describeError(e)}`)
                )
              )
            }
          }
          return result
        })
    }
  }

  /** Run the session until it ends; a cancelled turn is recorded, and the session goes on from its log. */
  run(io: SessionRuntime.Io, mode: "start" | "resume"): Effect.Effect<void> {
    const self = this
    const prepared = this.prepared
    return Effect.gen(function* () {
      let m = mode
      const settings = yield* Telemetry.settings(prepared.loaded, process.env).pipe(
        Effect.catchAll((e) =>
          Effect.as(
            Effect.sync(() => self.note(e.message)),
            undefined
          )
        )
      )
      const telemetry = yield* Telemetry.start(settings, {
        session: self.id,
        model: prepared.config.model,
        command: "acp",
        resuming: mode === "resume"
      })
      const observed = telemetry.wrap(io)
      while (true) {
        const recorded = m === "start" ? [] : yield* prepared.store.read(self.id).pipe(Effect.orElseSucceed(() => []))
        self.liveFrom = recorded.length === 0 ? 0 : recorded[recorded.length - 1]!.seq + 1
        // the editor's terminal runs a command with the user's full rights: only where no OS sandbox would
        const sandboxed =
          (prepared.config.sandbox?.mode ?? "workspace-write") !== "off" &&
          (yield* Effect.promise(() => Sandbox.detectInBackground())).available
        const services: SessionRuntime.Services = {
          languageModel: prepared.languageModel,
          plugins: prepared.plugins.plugins,
          tools: Tools.make(recorded).map((d) =>
            d.name === "run_shell" && self.terminal && !sandboxed
              ? self.shellInTerminal(d)
              : d.name === "read_file" && self.editorFs.read
                ? self.readInEditor(d)
                : (d.name === "write_file" || d.name === "edit_file") && (self.editorFs.read || self.editorFs.write)
                  ? self.writeBesideEditor(d)
                  : d
          ),
          sandbox: prepared.sandboxOptions
        }
        const program =
          m === "start"
            ? SessionRuntime.start({
                config: prepared.config,
                session: self.id,
                io: observed,
                services,
                store: prepared.store
              })
            : SessionRuntime.resume({ session: self.id, io: observed, services, store: prepared.store })
        const fiber = yield* Effect.fork(program as Effect.Effect<unknown, unknown>)
        self.fiber = fiber
        const exit = yield* Fiber.await(fiber)
        self.fiber = undefined
        if (self.cancelling && !self.closed) {
          self.cancelling = false
          // the turn is answered now; the session replays its log and waits for the next prompt
          const turn = self.turn
          self.turn = undefined
          turn?.resolve({ stopReason: "cancelled" })
          m = "resume"
          continue
        }
        if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
          const err = Cause.squash(exit.cause) as any
          const message =
            err?._tag === "SessionLocked"
              ? `session ${self.id} is in use by process ${err.pid}`
              : (err?.message ?? String(err))
          self.note(`session ${self.id} stopped: ${message}`)
          self.send({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: `\n\nmuse: ${message}` } })
        }
        break
      }
      self.closed = true
      const turn = self.turn
      self.turn = undefined
      turn?.resolve({ stopReason: turn.stop })
      self.idle()
      yield* prepared.plugins.close
      yield* Scope.close(self.scope, Exit.void)
    }).pipe(Effect.scoped)
  }
}

/** What of its file system the editor offers (`fs/read_text_file`, `fs/write_text_file`). */
export interface EditorFs {
  readonly read: boolean
  readonly write: boolean
}

interface ReadParams {
  readonly path: string
  readonly offset?: number | undefined
  readonly limit?: number | undefined
}

/** Most bytes of numbered lines shown from an editor buffer (as `read_file` shows from disk). */
const BUFFER_READ_BYTES = 256 * 1024

/** `read_file`'s result for the text of an editor buffer. */
const numberedFromBuffer = (rel: string, text: string, offset: number | undefined, limit: number | undefined) => {
  const lines = text.split("\n")
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  const start = offset ?? 1
  const shown: Array<string> = []
  let bytes = 0
  let capped = false
  for (let n = start; n <= lines.length && n < start + (limit ?? Number.MAX_SAFE_INTEGER); n++) {
    const line = `${String(n).padStart(6)}\t${lines[n - 1]!.replace(/\r$/, "")}`
    const len = Buffer.byteLength(line) + 1
    if (bytes + len > BUFFER_READ_BYTES && shown.length > 0) {
      capped = true
      break
    }
    bytes += len
    shown.push(line)
  }
  const end = start + shown.length - 1
  const notes = ["read from the editor, where the file has unsaved changes (the file on disk differs)"]
  if (capped) notes.push(`output capped; continue with offset=${end + 1}`)
  else if (lines.length > 0 && start > lines.length)
    notes.push(`offset ${start} is past the end: ${lines.length} lines`)
  return {
    path: rel,
    content: shown.join("\n"),
    start_line: start,
    end_line: Math.max(end, start - 1),
    total_lines: lines.length,
    note: notes.join("; ")
  }
}

const describeError = (e: unknown): string => {
  if (e instanceof CliError) return e.detail ? `${e.message}\n\n${e.detail}` : e.message
  return e instanceof Error ? e.message : String(e)
}

/** `muse acp`: serve ACP on stdin/stdout until the editor closes the connection. */
export const run = (options: Options): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const sdk: Sdk = yield* Effect.promise(() => import("@agentclientprotocol/sdk"))
    const note = (line: string) => void options.stderr.write(`muse acp: ${line}\n`)
    const sessions = new Map<string, Live>()
    let terminal = false
    let editorFs: EditorFs = { read: false, write: false }
    // an editor that presents notices gets muse's own lines as notices; one that does not gets them
    // as a message marked as muse's (`_meta`), never inside the agent's text. Each once per connection
    let notices = false
    const noticed = new Set<string>()
    const fail = (code: number, message: string) => new sdk.RequestError(code, message)

    const start = async (
      client: acp.AgentContext,
      cwd: string,
      mcpServers: ReadonlyArray<acp.McpServer>,
      resume: string | undefined
    ): Promise<Live> => {
      const flags: Session.Flags = { ...options.flags, cwd: options.flags.cwd ?? cwd }
      const editorServers = Mcp.fromClient(mcpServers as ReadonlyArray<Mcp.ClientServer>)
      // no one to ask in the terminal: a folder's own settings take effect when it was trusted
      // before (`muse trust`) or with --trust, as in a headless run
      const trust = Session.headlessTrust(flags, options.env)
      const id = resume ?? EventLogFile.newSessionId()
      // the session's store stays open until the session ends
      const scope = await Effect.runPromise(Scope.make())
      const prepared = await Effect.runPromise(
        Effect.either(
          resume
            ? Session.prepareResume(resume, flags, options.env, trust, { mcpServers: editorServers })
            : Session.prepareNew(flags, options.env, id, "", trust, { mcpServers: editorServers })
        ).pipe(Scope.extend(scope))
      )
      if (prepared._tag === "Left") {
        await Effect.runPromise(Scope.close(scope, Exit.void))
        const e = prepared.left
        throw fail(e.code === ExitCode.Usage && /no session/.test(e.message) ? -32002 : -32603, describeError(e))
      }
      const live = new Live(id, prepared.right, client, note, terminal, scope, editorFs)
      for (const w of [...prepared.right.notices, ...prepared.right.plugins.warnings]) {
        note(w)
        if (noticed.has(w)) continue
        noticed.add(w)
        live.send(noticeUpdate(w, notices))
      }
      return live
    }

    const io = (live: Live): SessionRuntime.Io => ({
      input: live.input,
      prompter: {
        ask: (request: Approvals.Request) =>
          Effect.tryPromise(() => askPermission(live, request)).pipe(
            Effect.orElseSucceed(() => ({ allow: false, scope: "once" as const, reason: "the editor did not answer" }))
          )
      },
      onText: (agent, delta) =>
        Effect.sync(() => {
          if (agent === "main" && delta !== "") {
            live.send({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: delta } })
          }
        }),
      onEvent: (e) =>
        Effect.sync(() => {
          if (e.type === "approval.requested") live.pendingApproval.set(e.agent, String((e.data as any)?.callId ?? ""))
          if (e.seq >= live.liveFrom) live.updates.event(e, true)
        }),
      output: (text) =>
        Effect.sync(() =>
          live.send({
            sessionUpdate: "agent_message_chunk",
            content: { type: "text", text: text.endsWith("\n") ? text : `${text}\n` }
          })
        ),
      onTurn: (result) => Effect.sync(() => live.finished(result))
    })

    const askPermission = async (live: Live, request: Approvals.Request): Promise<Approvals.Answer> => {
      const callId = live.pendingApproval.get(request.agent) ?? ""
      const toolCallId = request.agent === "main" ? callId : `${request.agent}/${callId}`
      const plan = request.tool === "/plan"
      const options: Array<acp.PermissionOption> = plan
        ? [
            { optionId: "allow", name: "Approve the plan", kind: "allow_once" },
            { optionId: "reject", name: "Reject", kind: "reject_once" }
          ]
        : [
            { optionId: "allow", name: "Allow", kind: "allow_once" },
            ...(request.proposal
              ? [{ optionId: "session", name: "Allow for this session", kind: "allow_always" as const }]
              : []),
            { optionId: "reject", name: "Reject", kind: "reject_once" }
          ]
      const title = plan
        ? request.summary.charAt(0).toUpperCase() + request.summary.slice(1)
        : Render.toolTitle(request.tool, request.summary, plain)
      const kind: acp.ToolKind = plan ? "think" : kindOf(request.tool, request.effect)
      if (!plan) live.updates.pending(toolCallId, title, kind)
      const r = await live.client.request("session/request_permission", {
        sessionId: live.id,
        toolCall: {
          toolCallId,
          title,
          kind,
          status: "pending",
          ...(request.preview ? { content: [textContent(request.preview)] } : {})
        },
        options
      })
      if (r.outcome.outcome === "cancelled") return { allow: false, scope: "once", reason: "cancelled in the editor" }
      switch (r.outcome.optionId) {
        case "allow":
          return { allow: true, scope: "once" }
        case "session":
          return { allow: true, scope: "session", ...(request.proposal ? { rule: request.proposal } : {}) }
        default:
          return { allow: false, scope: "once", reason: "refused in the editor" }
      }
    }

    const app = sdk
      .agent({ name: "muse" })
      .onRequest("initialize", ({ params }) => {
        terminal = params.clientCapabilities?.terminal === true
        notices = params.clientCapabilities?.session?.notices != null
        editorFs = {
          read: params.clientCapabilities?.fs?.readTextFile === true,
          write: params.clientCapabilities?.fs?.writeTextFile === true
        }
        return {
          protocolVersion: sdk.PROTOCOL_VERSION,
          agentCapabilities: {
            loadSession: true,
            promptCapabilities: { embeddedContext: true },
            mcpCapabilities: { http: true, sse: true }
          },
          agentInfo: { name: "muse", title: "muse", version: version() },
          authMethods: []
        }
      })
      .onRequest("session/new", async ({ params, client }) => {
        if (!path.isAbsolute(params.cwd)) throw fail(-32602, `cwd must be an absolute path, got ${params.cwd}`)
        const live = await start(client, params.cwd, params.mcpServers ?? [], undefined)
        sessions.set(live.id, live)
        Effect.runFork(live.run(io(live), "start"))
        return { sessionId: live.id }
      })
      .onRequest("session/load", async ({ params, client }) => {
        const open = sessions.get(params.sessionId)
        if (open && !open.closed) throw fail(-32602, `session ${params.sessionId} is already open on this connection`)
        const live = await start(client, params.cwd, params.mcpServers ?? [], params.sessionId)
        sessions.set(live.id, live)
        // the conversation so far, as the editor would have seen it
        const past = await Effect.runPromise(live.prepared.store.read(live.id).pipe(Effect.orElseSucceed(() => [])))
        for (const e of past) live.updates.event(e, false)
        Effect.runFork(live.run(io(live), "resume"))
        await live.whenReady()
        return {}
      })
      .onRequest("session/prompt", async ({ params }) => {
        const live = sessions.get(params.sessionId)
        if (!live || live.closed)
          throw fail(-32002, `no open session ${params.sessionId}; start one with session/new or session/load`)
        const text = textOf(params.prompt).trim()
        if (text === "") return { stopReason: "end_turn" as const }
        try {
          return await live.prompt(text)
        } catch (e) {
          throw fail(-32602, describeError(e))
        }
      })
      .onNotification("session/cancel", ({ params }) => {
        sessions.get(params.sessionId)?.cancel()
      })
    const stream = sdk.ndJsonStream(
      Writable.toWeb(options.stdout as Writable) as WritableStream<Uint8Array>,
      Readable.toWeb(options.stdin as Readable) as ReadableStream<Uint8Array>
    )
    const connection = app.connect(stream)
    yield* Effect.promise(() => connection.closed)
    for (const live of sessions.values()) live.close()
    yield* Effect.forEach(
      [...sessions.values()],
      (live) => Effect.zipRight(live.prepared.plugins.close, Scope.close(live.scope, Exit.void)),
      { discard: true }
    )
    return ExitCode.Success
  })
