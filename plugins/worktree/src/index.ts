/**
 * @musekit/plugin-worktree — a git worktree and branch per writing agent: isolated checkouts,
 * reviewable diffs, explicit merge-back with conflict reports, cleanup and crash re-attachment.
 *
 * @example
 * ```ts
 * import { Paths, Worktrees } from "@musekit/plugin-worktree"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const wt = yield* Worktrees.Worktrees
 *   const { path } = yield* wt.allocate({ agent: "worker-1" })
 *   return yield* Paths.resolveInside(path, "src/index.ts")
 * }).pipe(Effect.provide(Worktrees.layer({ repo: ".", sessionId: "demo" })))
 * ```
 */
export * as Paths from "./Paths.js"
export * as WorktreePlugin from "./WorktreePlugin.js"
export * as Worktrees from "./Worktrees.js"
