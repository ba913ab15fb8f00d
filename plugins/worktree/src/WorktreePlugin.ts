/**
 * The worktree plugin: every writing crew member works in its own git worktree on a fresh branch.
 *
 * Its `onSpawn` hook allocates the member's worktree (recorded as a step, so a replay never touches
 * git and a resume re-attaches or recreates it) and roots the member's `Workspace` there: the coding
 * tools resolve every path through that workspace, so a member cannot touch the main checkout or
 * another member's worktree. The main agent gets `worktree_diff` and `worktree_merge`; merging is an
 * explicit, approvable step that reports conflicts and never leaves the repository half-merged.
 *
 * @example
 * ```ts
 * import { WorktreePlugin } from "@musekit/plugin-worktree"
 *
 * const plugin = WorktreePlugin.make({ repo: process.cwd(), sessionId: "20261130-101500-a1b2c3" })
 * // Plugin.layer([plugin, ...]) — members of writing roles now get their own worktree
 * ```
 */
import { Plugin, Recorder, Tools, Workspace } from "@musekit/core"
import { WorkspaceNode } from "@musekit/node"
import { Effect, Layer, Schema } from "effect"
import * as Worktrees from "./Worktrees.js"

export interface Options extends Worktrees.Options {
  /** Roles whose members get a worktree (default: every role that writes). */
  readonly roles?: ReadonlyArray<string> | undefined
  /**
   * For `replay`: git is never run, not even to open the repository (which need not exist any
   * more); every allocation and tool result comes from the log.
   */
  readonly replaying?: boolean | undefined
}

/** The service for a replay: nothing may reach git. */
const replayingService = (options: Options): Worktrees.Service => {
  const never = (what: string) =>
    Effect.dieMessage(`worktree ${what} during a replay: replays take every git result from the log`)
  return {
    repo: options.repo,
    sessionId: options.sessionId,
    base: "",
    dir: "",
    dirty: options.dirty ?? "ignore",
    plan: () => never("plan"),
    allocate: () => never("allocate"),
    get: () => never("get"),
    list: Effect.succeed([]),
    commit: () => never("commit"),
    diff: () => never("diff"),
    merge: () => never("merge"),
    release: () => never("release"),
    cleanup: () => never("cleanup"),
    reattach: () => never("reattach")
  }
}

const describe = (e: unknown) =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)

/** The workspace of an allocation: the real worktree, or (replaying) a lexical one that touches nothing. */
const workspaceFor = (
  allocation: Worktrees.Allocation,
  mode: Recorder.Service["mode"]
): Effect.Effect<Workspace.Service> =>
  mode === "replay"
    ? Workspace.Workspace.pipe(Effect.provide(Workspace.layerLexical(allocation.path)))
    : WorkspaceNode.make(allocation.path).pipe(Effect.orDie)

export const make = (options: Options): Plugin.Plugin => {
  const onSpawn = (info: Plugin.SpawnInfo) =>
    Effect.gen(function* () {
      const wants = options.roles ? options.roles.includes(info.role.name) : info.role.writes
      if (!wants) return undefined
      const worktrees = yield* Worktrees.Worktrees
      const rec = yield* Recorder.Recorder
      const request = { agent: info.agent, paths: info.paths }
      const { value } = yield* Recorder.step<
        { readonly allocation: Worktrees.Allocation } | { readonly error: string },
        never,
        never
      >({
        agent: info.agent,
        // where it will go depends on the repository's HEAD now: an observation, not compared on replay
        intent: { type: "worktree.allocating", data: { agent: info.agent, paths: info.paths ?? null } },
        observe: Effect.map(Effect.orDie(worktrees.plan(request)), (planned) => ({ planned })),
        run: () =>
          worktrees.allocate(request).pipe(
            Effect.map((allocation) => ({ allocation })),
            Effect.catchAll((e) => Effect.succeed({ error: describe(e) }))
          ),
        outcome: (r) =>
          "error" in r
            ? { type: "worktree.failed", data: { error: r.error } }
            : { type: "worktree.allocated", data: { allocation: r.allocation } },
        outcomeTypes: ["worktree.allocated", "worktree.failed"],
        fromOutcome: (e) =>
          e.type === "worktree.failed"
            ? { error: String((e.data as { error: unknown }).error) }
            : { allocation: (e.data as { allocation: Worktrees.Allocation }).allocation }
      }).pipe(Effect.provideService(Recorder.Recorder, rec))
      if ("error" in value) {
        // the member then works in the shared workspace; the failure is in the log and in its report
        return undefined
      }
      if (rec.mode === "resume") {
        // the log says the worktree exists: make it so again after a crash
        yield* Effect.ignore(worktrees.reattach([value.allocation]))
      }
      const workspace = yield* workspaceFor(value.allocation, rec.mode)
      return { workspace, info: value.allocation } satisfies Plugin.SpawnResult
    })

  const tools = [
    Tools.make({
      name: "worktree_diff",
      description:
        "Show the changes a crew member made in its worktree (commits and uncommitted work) against the session's base.",
      parameters: { agent: Schema.String },
      effect: "read",
      handler: ({ agent }) =>
        Effect.flatMap(Worktrees.Worktrees, (w) => w.diff(agent)).pipe(
          Effect.map((diff) => ({ agent, diff })),
          Effect.mapError((e) => new Tools.ToolError({ message: describe(e) }))
        ) as unknown as Effect.Effect<{ agent: string; diff: string }, Tools.ToolError>
    }),
    Tools.make({
      name: "worktree_merge",
      description:
        "Merge a crew member's work into the session branch (commit it first). A conflict is aborted and reported with the files and hunks; the repository is never left half-merged.",
      parameters: {
        agent: Schema.String,
        strategy: Schema.optional(Schema.Literal("merge", "cherry-pick")),
        message: Schema.optional(Schema.String)
      },
      effect: "write",
      summarize: ({ agent, strategy }) => `merge the work of ${agent} (${strategy ?? "merge"})`,
      handler: ({ agent, strategy, message }) =>
        Effect.gen(function* () {
          const w = yield* Worktrees.Worktrees
          yield* w.commit(agent, message ?? `work of ${agent}`)
          return yield* w.merge(agent, { strategy: strategy ?? "merge", message })
        }).pipe(Effect.mapError((e) => new Tools.ToolError({ message: describe(e) }))) as unknown as Effect.Effect<
          Worktrees.MergeResult,
          Tools.ToolError
        >
    })
  ]

  /** A member restored from a checkpoint: its worktree, as its spawn recorded it. */
  const onRestore = (info: Plugin.RestoreInfo) =>
    Effect.gen(function* () {
      const allocation = info.info as Worktrees.Allocation | null
      if (!allocation || typeof allocation.path !== "string") return undefined
      const rec = yield* Recorder.Recorder
      if (rec.mode !== "replay") {
        // known to the service again (for diff and merge), recreated if a crash lost it
        const worktrees = yield* Worktrees.Worktrees
        yield* Effect.ignore(worktrees.reattach([allocation]))
      }
      const workspace = yield* workspaceFor(allocation, rec.mode)
      return { workspace, info: allocation } satisfies Plugin.SpawnResult
    })

  return Plugin.make({
    name: "worktree",
    layer: options.replaying ? Layer.succeed(Worktrees.Worktrees, replayingService(options)) : Worktrees.layer(options),
    hooks: { onSpawn, onRestore },
    // its state is the members' worktrees: checkpoints keep each member's allocation, `onRestore` reattaches it
    checkpoint: "stateless",
    // the registry runs plugin tools with the plugins' layers, so `Worktrees` is there
    tools
  })
}
