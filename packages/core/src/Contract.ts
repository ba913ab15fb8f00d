/**
 * The contracts a plugin author implements — plugins, their hooks and what the hooks get and
 * give, skills, crew roles, inbox messages — beneath the machinery that runs them (`Agent`, `Crew`,
 * the plugin and skill registries). This module imports none of that machinery; `Plugin`, `Skill`,
 * `Agent` and `ReportPolicy` re-export what they use from it under the same names, so
 * `Plugin.Role` and `Contract.Role` are one type.
 *
 * @example
 * ```ts
 * import type { Contract } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const hooks: Contract.Hooks = {
 *   transformPrompt: (input: Contract.PromptInput) => Effect.succeed(input)
 * }
 * ```
 */
import type { Prompt } from "@effect/ai"
import { type Effect, type Layer, Schema } from "effect"
import type * as Event from "./Event.js"
import type * as Model from "./Model.js"
import type * as Recorder from "./Recorder.js"
import type * as Tools from "./Tools.js"
import type * as Workspace from "./Workspace.js"

// ---------------------------------------------------------------------------------------------
// Skills
// ---------------------------------------------------------------------------------------------

export class SkillError extends Schema.TaggedError<SkillError>("@musekit/core/SkillError")("SkillError", {
  skill: Schema.String,
  message: Schema.String
}) {}

export interface Skill<A = any, R = any> {
  readonly name: string
  readonly description: string
  /** Decodes the text after `/name` (a string schema takes it whole). */
  readonly args: Schema.Schema<A, string, never>
  /**
   * Runs the skill. It fails with `SkillError` for the user to read; errors of the recorder (a
   * replay that diverged, the log) pass through as they are.
   */
  readonly run: (args: A) => Effect.Effect<unknown, SkillError | Recorder.RecorderError, R>
  /** For `SKILL.md` skills: the instructions given to the model. */
  readonly instructions?: string | undefined
  /** Where it came from (a package name or a file path). */
  readonly source?: string | undefined
}

// ---------------------------------------------------------------------------------------------
// Inbox messages (what the crew's report policy delivers to an agent)
// ---------------------------------------------------------------------------------------------

/** Something delivered to an agent between model calls. */
export interface InboxMessage {
  readonly id: string
  readonly from: string
  readonly text: string
  /** Ids of what the message carries (e.g. crew reports), so a resumed session does not deliver them twice. */
  readonly ids?: ReadonlyArray<string> | undefined
}

// ---------------------------------------------------------------------------------------------
// Plugins: roles, hooks and what they get and give
// ---------------------------------------------------------------------------------------------

/** A crew role as data. */
export interface Role {
  readonly name: string
  readonly description: string
  /** System instructions for members of this role. */
  readonly instructions: string
  /** Tool names the role may use (`"*"` = all), in addition to the crew tools. */
  readonly tools: ReadonlyArray<string> | "*"
  /** Whether members change files (the worktree plugin gives each writer its own worktree). */
  readonly writes: boolean
  readonly approvalMode?: "read-only" | "ask" | "auto-edit" | "auto" | undefined
}

/** An attachment on a user prompt (e.g. `@clip.mp4` in the CLI). */
export interface Attachment {
  readonly path: string
  readonly mediaType?: string | undefined
}

export interface PromptInput {
  readonly agent: string
  readonly content: ReadonlyArray<Prompt.UserMessagePartEncoded>
  readonly attachments: ReadonlyArray<Attachment>
}

export interface ContextInput {
  readonly agent: string
  /** The `provider/model` name the context is for. */
  readonly model: string
  readonly messages: ReadonlyArray<Prompt.MessageEncoded>
  /** The system prompt that will precede the messages. */
  readonly system: string
  /** The provider said the last request was too long: shrink now, whatever the budget says. */
  readonly force: boolean
  /** Make a recorded model call (e.g. to summarize); use an agent name of your own, like `main/compactor`. */
  readonly generate: (request: {
    readonly agent: string
    readonly system: string
    readonly messages: ReadonlyArray<Prompt.MessageEncoded>
  }) => Effect.Effect<{ readonly text: string }, Model.ModelError | Recorder.RecorderError>
}

export interface ToolCallInfo {
  readonly agent: string
  readonly callId: string
  readonly tool: string
  readonly params: unknown
}

/** `block` refuses the call (the reason goes to the model); `params` rewrites the arguments. */
export type BeforeToolCall = { readonly block: string } | { readonly params: unknown }

export interface ToolResult {
  readonly isFailure: boolean
  readonly result: unknown
}

export interface SpawnInfo {
  readonly agent: string
  readonly role: Role
  /** Paths the first task names, for sparse checkouts. */
  readonly paths?: ReadonlyArray<string> | undefined
}

/** A crew member coming back from a checkpoint, with what its spawn recorded (`SpawnResult.info`). */
export interface RestoreInfo {
  readonly agent: string
  readonly role: Role
  readonly info: unknown
}

export interface SpawnResult {
  readonly workspace: Workspace.Service
  /** Extra data recorded with the spawn (e.g. the worktree path and branch). */
  readonly info?: unknown
  /**
   * The member's workspace could not be given back (a worktree that could not be re-created after a
   * crash): why. `workspace` then refuses every path, and the member fails, reporting this to the
   * main agent, as soon as it goes on live (what it replays still replays).
   */
  readonly unavailable?: string | undefined
}

/**
 * A session with recorded events is run again (resumed, or replayed): what it replays, before any
 * crew member comes back or any agent goes on. A plugin whose effects live outside the log (git
 * worktrees, say) puts the world back here; what it finds it records under an agent name of its
 * own (`Recorder.takeRecorded` gives back what earlier runs recorded there, so a replay, which
 * cannot look, reads it instead).
 */
export interface ResumeInfo {
  /** The events the run replays (after the checkpoint it starts from, if any). */
  readonly events: ReadonlyArray<Event.Envelope>
  /** What members restored from a checkpoint recorded about workspaces of their own (`SpawnResult.info`). */
  readonly workspaces: ReadonlyArray<{ readonly agent: string; readonly info: unknown }>
}

/** A plugin could not give a crew member what its role needs (e.g. its own git worktree): the member fails. */
export class SpawnFailed extends Schema.TaggedError<SpawnFailed>("@musekit/core/SpawnFailed")("SpawnFailed", {
  agent: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.agent} could not start: ${this.reason}`
  }
}

/**
 * What every hook may use without its plugin's layer providing it: the recorder of the session it
 * runs in (hooks run with the services of the agent or crew that calls them).
 */
export type HookContext = Recorder.Recorder

/** A hook: `R` is what it needs to run (`HookContext` and what its plugin's layer provides). */
export type HookFn<I, O, E = never, R = HookContext> = (input: I) => Effect.Effect<O, E, R>
export type Hook<I, O, E = never, R = HookContext> =
  | HookFn<I, O, E, R>
  | { readonly handler: HookFn<I, O, E, R>; readonly order?: "pre" | "post" | undefined }

/** A plugin's hooks; `R` is what they may need (by default `HookContext`). */
export interface Hooks<R = HookContext> {
  readonly transformPrompt?: Hook<PromptInput, PromptInput, never, R> | undefined
  /** May fail only with the recorder's errors (divergence, end of a replayed log): those end the turn. */
  readonly transformContext?:
    | Hook<ContextInput, ReadonlyArray<Prompt.MessageEncoded>, Recorder.RecorderError, R>
    | undefined
  readonly beforeToolCall?: Hook<ToolCallInfo, BeforeToolCall | undefined, never, R> | undefined
  readonly afterToolCall?: Hook<ToolCallInfo & { readonly result: ToolResult }, ToolResult, never, R> | undefined
  /**
   * May fail with the recorder's errors (those end the member, and a replay reports them) or with
   * `SpawnFailed`: the member fails visibly (recorded, reported to the main agent) instead of
   * working without what its role needs.
   */
  readonly onSpawn?: Hook<SpawnInfo, SpawnResult | undefined, Recorder.RecorderError | SpawnFailed, R> | undefined
  /**
   * A member that got its workspace from this plugin's `onSpawn` is restored from a checkpoint:
   * give its workspace back (records nothing). Without it, such members turn checkpoints off.
   */
  readonly onRestore?: Hook<RestoreInfo, SpawnResult | undefined, never, R> | undefined
  /** The session is resumed or replayed (see `ResumeInfo`); runs once, before the crew's members come back. */
  readonly onResume?: Hook<ResumeInfo, void, never, R> | undefined
  readonly onEvent?: Hook<Event.Envelope, void, never, R> | undefined
}

/**
 * How a plugin's state between turns is kept in checkpoints (the folded state of a session at an
 * idle point, which resume restores instead of re-running the session from its start).
 * `"stateless"`: nothing to keep. Otherwise `save` returns the state as JSON data, or `undefined`
 * when it cannot be saved now (then no checkpoint is taken), and `restore` puts it back in a new
 * run. Both run with the session's `Recorder` in context (one plugin value may serve several
 * sessions). A plugin that declares nothing turns checkpoints off for the sessions it is in.
 */
export type Checkpointing =
  | "stateless"
  | {
      readonly save: Effect.Effect<unknown, never, Recorder.Recorder>
      readonly restore: (state: unknown) => Effect.Effect<void, never, Recorder.Recorder>
    }

/**
 * A plugin, as `Plugin.make` returns it and `Plugin.layer` takes it. Its `layer` is self-contained
 * (it needs nothing; a failure building it is a defect naming nothing more specific), and its
 * hooks may use what that layer provides besides `HookContext`: `Plugin.make` checks that (see
 * `PluginOptions`), and the registry runs them with those services. Here the layer's services and
 * error are no longer named, so call the hooks through the registry (`Plugin.layer`), not directly.
 */
export interface Plugin {
  readonly name: string
  readonly layer?: Layer.Layer<never, unknown> | undefined
  readonly hooks?: Hooks | undefined
  /** Run, like the hooks, with the layer's services and `HookContext`. */
  readonly tools?: ReadonlyArray<Tools.Definition<any, any, HookContext>> | undefined
  readonly skills?: ReadonlyArray<Skill> | undefined
  readonly roles?: ReadonlyArray<Role> | undefined
  /** What the plugin keeps between turns, for checkpoints (see `Checkpointing`). */
  readonly checkpoint?: Checkpointing | undefined
}

/**
 * What `Plugin.make` takes: a plugin whose `layer` provides `ROut` (failing with `E` while it is
 * built) and whose hooks may need `ROut` and `HookContext`, nothing else. A hook that needs a
 * service its plugin does not provide does not compile. `ROut` is read from `layer` alone; when
 * TypeScript cannot read it (a layer built inline by a generic constructor such as `Layer.succeed`,
 * next to hooks or tools declared elsewhere), name it: `Plugin.make<MyService>({ ... })`, or build
 * the layer in a constant first.
 */
export interface PluginOptions<ROut = never, E = never> extends Omit<Plugin, "layer" | "hooks" | "tools"> {
  readonly layer?: Layer.Layer<ROut, E> | undefined
  readonly hooks?: Hooks<NoInfer<ROut> | HookContext> | undefined
  /** Tools that may need what `layer` provides and `HookContext`, like the hooks. */
  readonly tools?: ReadonlyArray<Tools.Definition<any, any, NoInfer<ROut> | HookContext>> | undefined
}
