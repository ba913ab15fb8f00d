/**
 * The worktree plugin: every writing crew member works in its own git worktree on a fresh branch.
 *
 * Its `onSpawn` hook allocates the member's worktree (recorded as a step, so a replay never touches
 * git) and roots the member's `Workspace` there: the coding tools resolve every path through that
 * workspace, so a member cannot touch the main checkout or another member's worktree. A member
 * whose worktree cannot be made fails (recorded, reported to the main agent); it never falls back
 * to the main checkout. The main agent gets `worktree_diff` and `worktree_merge`; merging is an
 * explicit, approvable step that reports conflicts and never leaves the repository half-merged.
 *
 * After a crash, `onResume` brings back every worktree the log says exists — before any agent
 * goes on — and records what it had to rebuild or could not (`worktree.reattached`, agent
 * `worktree`); an allocation the crash cut short is finished from what it had planned; a merge the
 * crash cut short is settled by asking git whether its commit is there (`worktree_merge` declares
 * `observe` and `settle`).
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
import { Effect, Either, Layer, Schema } from "effect"
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

/** The agent name under which resumes record what they found (`worktree.reattached`). */
export const NOTES = "worktree"

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
    observeMerge: () => never("observeMerge"),
    settleMerge: () => never("settleMerge"),
    release: () => never("release"),
    cleanup: () => never("cleanup"),
    reattach: () => never("reattach")
  }
}

const describe = (e: unknown) =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)

const isAllocation = Schema.is(Worktrees.Allocation)

/** The workspace of an allocation: the real worktree, or (replaying) a lexical one that touches nothing. */
const workspaceFor = (
  allocation: Worktrees.Allocation,
  mode: Recorder.Service["mode"]
): Effect.Effect<Workspace.Service> =>
  mode === "replay"
    ? Workspace.Workspace.pipe(Effect.provide(Workspace.layerLexical(allocation.path)))
    : WorkspaceNode.make(allocation.path).pipe(Effect.orDie)

/** The workspace of a member whose worktree could not be given back: every path is refused, with why. */
const unavailableWorkspace = (allocation: Worktrees.Allocation, why: string): Workspace.Service => {
  const refuse = (p: string) =>
    Effect.fail(
      new Workspace.PathEscape({ path: p, root: allocation.path, reason: `the worktree is unavailable: ${why}` })
    )
  return {
    root: allocation.path,
    resolve: refuse,
    relative: (absolute) => Workspace.relativeTo(allocation.path, absolute),
    fingerprint: (paths) => Effect.succeed(Object.fromEntries(paths.map((p) => [p, null]))),
    read: refuse,
    restore: refuse
  }
}

/**
 * The worktrees a resumed run must bring back: those a checkpoint's members had, those the events
 * allocated, and those whose allocation the crash cut short (as it had planned them).
 */
export const allocationsIn = (info: Plugin.ResumeInfo): ReadonlyArray<Worktrees.Allocation> => {
  const byAgent = new Map<string, Worktrees.Allocation>()
  for (const w of info.workspaces) if (isAllocation(w.info)) byAgent.set(w.info.agent, w.info)
  const settled = new Set<string>()
  for (const e of info.events) {
    if ((e.type === "worktree.allocated" || e.type === "worktree.failed") && e.parent) settled.add(e.parent)
  }
  for (const e of info.events) {
    if (e.type === "worktree.allocated") {
      const a = (e.data as { allocation?: unknown } | null)?.allocation
      if (isAllocation(a)) byAgent.set(a.agent, a)
    } else if (e.type === "worktree.allocating" && !settled.has(e.id)) {
      const planned = (e.data as { observed?: { planned?: unknown } } | null)?.observed?.planned
      if (isAllocation(planned) && planned.agent === e.agent) byAgent.set(planned.agent, planned)
    }
  }
  return [...byAgent.values()]
}

export const make = (options: Options): Plugin.Plugin => {
  /** Per service (one per session): members whose worktree a resume could not give back, and why. */
  const lost = new WeakMap<Worktrees.Service, Map<string, string>>()
  const lostOf = (w: Worktrees.Service) => {
    let m = lost.get(w)
    if (!m) lost.set(w, (m = new Map()))
    return m
  }

  /** The worktree of `allocation` is known to the service again: `undefined`, or why it could not be. */
  const ensureAttached = (worktrees: Worktrees.Service, allocation: Worktrees.Allocation) =>
    Effect.gen(function* () {
      const known = lostOf(worktrees).get(allocation.agent)
      if (known !== undefined) return known
      if (Either.isRight(yield* Effect.either(worktrees.get(allocation.agent)))) return undefined
      const back = yield* Effect.either(worktrees.reattach([allocation]))
      if (Either.isRight(back)) return undefined
      const why = describe(back.left)
      lostOf(worktrees).set(allocation.agent, why)
      return why
    })

  /** The member's workspace: its worktree, or (when that could not be brought back) one that refuses everything. */
  const spawnResult = (allocation: Worktrees.Allocation, rec: Recorder.Service) =>
    Effect.gen(function* () {
      if (rec.mode !== "replay") {
        const why = yield* ensureAttached(yield* Worktrees.Worktrees, allocation)
        if (why !== undefined)
          return {
            workspace: unavailableWorkspace(allocation, why),
            info: allocation,
            unavailable: why
          } satisfies Plugin.SpawnResult
      }
      return { workspace: yield* workspaceFor(allocation, rec.mode), info: allocation } satisfies Plugin.SpawnResult
    })

  /**
   * Before any agent goes on: every worktree the log (or checkpoint) says exists is brought back,
   * and what was found is recorded. A replay reads what earlier resumes recorded instead.
   */
  const onResume = (info: Plugin.ResumeInfo) =>
    Effect.gen(function* () {
      const rec = yield* Recorder.Recorder
      if (rec.mode === "live") return
      yield* Recorder.takeRecorded(NOTES)
      if (rec.mode === "replay") return
      const records = allocationsIn(info)
      if (records.length === 0) return
      const worktrees = yield* Worktrees.Worktrees
      const all = yield* Effect.either(worktrees.reattach(records))
      const found: Array<{ agent: string; path: string; branch: string; status: string; error?: string }> = []
      if (Either.isRight(all)) {
        for (const r of all.right) found.push({ agent: r.agent, path: r.path, branch: r.branch, status: r.status })
      } else {
        // one of them failed: bring back the others one by one, and say which could not be
        for (const r of records) {
          const one = yield* Effect.either(worktrees.reattach([r]))
          if (Either.isRight(one)) {
            found.push({ agent: r.agent, path: r.path, branch: r.branch, status: one.right[0]!.status })
          } else {
            const error = describe(one.left)
            lostOf(worktrees).set(r.agent, error)
            found.push({ agent: r.agent, path: r.path, branch: r.branch, status: "failed", error })
          }
        }
      }
      // all of them as the log left them: nothing to tell (resuming a finished session changes nothing)
      if (found.every((f) => f.status === "attached")) return
      yield* rec.append({ agent: NOTES, type: "worktree.reattached", data: { worktrees: found } })
    }).pipe(Effect.orDie)

  const onSpawn = (info: Plugin.SpawnInfo) =>
    Effect.gen(function* () {
      const wants = options.roles ? options.roles.includes(info.role.name) : info.role.writes
      if (!wants) return undefined
      const worktrees = yield* Worktrees.Worktrees
      const rec = yield* Recorder.Recorder
      const request = { agent: info.agent, paths: info.paths }
      const asValue = (e: Effect.Effect<Worktrees.Allocation, unknown>) =>
        e.pipe(
          Effect.map((allocation) => ({ allocation })),
          Effect.catchAll((e) => Effect.succeed({ error: describe(e) }))
        )
      const { value } = yield* Recorder.step<
        { readonly allocation: Worktrees.Allocation } | { readonly error: string },
        never,
        never
      >({
        agent: info.agent,
        // where it will go depends on the repository's HEAD now: an observation, not compared on replay
        intent: { type: "worktree.allocating", data: { agent: info.agent, paths: info.paths ?? null } },
        observe: Effect.map(Effect.orDie(worktrees.plan(request)), (planned) => ({ planned })),
        // allocating is idempotent: a re-run takes back the branch and worktree an earlier run made
        run: () => asValue(worktrees.allocate(request)),
        // cut short by a crash: finish exactly what it had planned (`onResume` usually did already)
        settle: (intent) => {
          const planned = (intent.data as { observed?: { planned?: unknown } }).observed?.planned
          if (!isAllocation(planned)) return Effect.succeed(undefined)
          return asValue(
            Effect.orElse(worktrees.get(info.agent), () =>
              Effect.map(worktrees.reattach([planned]), ([r]) => {
                const { status: _, ...allocation } = r!
                return allocation
              })
            )
          )
        },
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
        // never the main checkout instead: the member fails, and the main agent is told why
        return yield* new Plugin.SpawnFailed({
          agent: info.agent,
          reason: `its git worktree could not be made: ${value.error}`
        })
      }
      return yield* spawnResult(value.allocation, rec)
    })

  /** The worktree service, once the agent's worktree is known to it (else a clear error). */
  const withWorktree = <A>(agent: string, f: (w: Worktrees.Service) => Effect.Effect<A, Worktrees.WorktreeError>) =>
    Effect.flatMap(Worktrees.Worktrees, (w) => {
      const why = lostOf(w).get(agent)
      return why !== undefined
        ? Effect.fail(
            new Tools.ToolError({
              message: `the worktree of ${agent} could not be brought back after the restart: ${why}`
            })
          )
        : f(w).pipe(Effect.mapError((e) => new Tools.ToolError({ message: describe(e) })))
    })

  const mergeOptions = (strategy: Worktrees.MergeStrategy | undefined, message: string | undefined) => ({
    strategy: strategy ?? "merge",
    message
  })

  const tools = [
    Tools.make({
      name: "worktree_diff",
      description:
        "Show the changes a crew member made in its worktree (commits and uncommitted work) against the session's base.",
      parameters: { agent: Schema.String },
      effect: "read",
      durableIntent: false,
      handler: ({ agent }) => withWorktree(agent, (w) => w.diff(agent)).pipe(Effect.map((diff) => ({ agent, diff })))
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
        withWorktree(agent, (w) =>
          Effect.zipRight(
            w.commit(agent, message ?? `work of ${agent}`),
            w.merge(agent, mergeOptions(strategy, message))
          )
        ),
      // the merge's effect is in git, not in files: what the target was before, to judge it after a crash
      observe: ({ agent, strategy, message }) =>
        Effect.flatMap(Worktrees.Worktrees, (w) => w.observeMerge(agent, mergeOptions(strategy, message))),
      // cut short by a crash: git says whether the merge commit is there (done) or not (merge again,
      // which commits what the interrupted run had staged first)
      settle: ({ agent, strategy, message }, ctx) =>
        withWorktree(agent, (w) =>
          w.settleMerge(agent, mergeOptions(strategy, message), ctx.observed as Worktrees.MergeObservation | undefined)
        ).pipe(
          Effect.map(
            (s): Tools.Settlement<Worktrees.MergeResult> =>
              s._tag === "Landed" ? Tools.Settlement.done(s.result) : Tools.Settlement.rerun
          )
        )
    })
  ]

  /** A member restored from a checkpoint: its worktree, as its spawn recorded it. */
  const onRestore = (info: Plugin.RestoreInfo) =>
    Effect.gen(function* () {
      const allocation = info.info
      if (!isAllocation(allocation)) return undefined
      return yield* spawnResult(allocation, yield* Recorder.Recorder)
    })

  return Plugin.make({
    name: "worktree",
    layer: options.replaying ? Layer.succeed(Worktrees.Worktrees, replayingService(options)) : Worktrees.layer(options),
    hooks: { onSpawn, onRestore, onResume },
    // its state is the members' worktrees: checkpoints keep each member's allocation, `onRestore` reattaches it
    checkpoint: "stateless",
    // the registry runs plugin tools with the plugins' layers, so `Worktrees` is there
    tools
  })
}
