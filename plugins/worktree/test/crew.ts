/**
 * The crew session of `fixtures/crew-session.ts` as a test subject: a fresh repository and state
 * directory per session, the bundled script to start (or resume) it, and everything that must
 * hold once it is done. For the crash tests of the crew in worktrees.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Event } from "@musekit/core"
import { SessionRuntime } from "@musekit/node"
import { Effect } from "effect"
import { bundle, launch, readEvents } from "../../../packages/node/test/support/chaos.js"
import { WorktreePlugin, Worktrees } from "../src/index.js"
import { makeRepo, sh, worktreePaths } from "./helpers.js"

const here = path.dirname(fileURLToPath(import.meta.url))
export const WORKERS = ["worker-1", "worker-2", "worker-3"]

let script = ""
let work = ""

/** Bundle the session script (once per test file, in `beforeAll`). */
export const prepareCrew = async () => {
  work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-crew-")))
  script = await bundle(path.join(here, "fixtures", "crew-session.ts"), path.join(work, "crew-session.mjs"))
}

export const cleanupCrew = () => {
  if (work) fs.rmSync(work, { recursive: true, force: true })
}

export interface CrewRun {
  readonly repo: string
  readonly state: string
  readonly session: string
}

/** A new repository and state directory for one session. */
export const newCrewRun = (session: string): CrewRun => {
  const repo = makeRepo({ "README.md": "# parts\n" })
  const state = fs.mkdtempSync(path.join(work, "state-"))
  return { repo, state, session }
}

/** Start (or resume) the session, in a process group of its own so a kill takes its git children too. */
export const startCrew = (r: CrewRun, env?: NodeJS.ProcessEnv) =>
  launch(script, [r.state, r.session, r.repo], { group: true, env: { ...process.env, ...env } })

/** A file at a revision, or what git said when it is not there. */
const shown = (repo: string, rev: string) => {
  try {
    return sh(repo, "show", rev)
  } catch (e) {
    return `(${String((e as { stderr?: unknown }).stderr ?? e).trim()})`
  }
}

/** The folder holding the session's worktrees. */
export const worktreeDir = (r: CrewRun) =>
  path.join(path.dirname(r.repo), ".muse-worktrees", path.basename(r.repo), r.session)

export const mergesOf = (events: ReadonlyArray<Event.Envelope>) =>
  events.filter((e) => e.type === "tool.completed" && (e.data as { tool?: string }).tool === "worktree_merge")

/**
 * Everything that must hold once a session is done, as a list of problems (empty: all well). Ends
 * with the session's worktrees cleaned up, which must leave the repository as it was.
 */
export const problemsOf = async (r: CrewRun): Promise<Array<string>> => {
  const problems: Array<string> = []
  const events = await readEvents(r.state, r.session)
  const turns = events.filter((e) => e.agent === "main" && e.type === "turn.completed")
  const last = turns[turns.length - 1]?.data as { text?: string } | undefined
  if (last?.text !== "DONE") problems.push(`main did not answer DONE (last: ${JSON.stringify(last?.text)})`)

  // each worker's files are on main, each worker merged exactly once
  const tips = new Map(WORKERS.map((w) => [sh(r.repo, "rev-parse", `muse/${r.session}/${w}`), w]))
  const merges = sh(r.repo, "rev-list", "--merges", "--parents", "main")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.split(" "))
  for (const w of WORKERS) {
    for (const f of ["a.txt", "b.txt"]) {
      const got = shown(r.repo, `main:${w}/${f}`)
      if (got !== `${f} of ${w}`) problems.push(`${w}/${f} on main is ${JSON.stringify(got)}`)
    }
    const into = merges.filter((m) => m.slice(2).some((p) => tips.get(p) === w))
    if (into.length !== 1) problems.push(`${w} merged ${into.length} times`)
  }
  if (merges.length !== WORKERS.length) problems.push(`${merges.length} merge commits on main`)
  const status = sh(r.repo, "status", "--porcelain")
  if (status !== "") problems.push(`the checkout is not clean:\n${status}`)

  // every recorded merge is the merge git has
  const recorded = mergesOf(events).map((e) => e.data as { isFailure: boolean; result: any; settled?: string })
  if (recorded.length !== WORKERS.length) problems.push(`${recorded.length} merges recorded`)
  for (const m of recorded) {
    if (m.isFailure || m.result?._tag !== "Merged" || m.result.changed !== true) {
      problems.push(`a merge recorded as ${JSON.stringify(m.result)}`)
      continue
    }
    const commit = merges.find((c) => c[0] === m.result.commit)
    if (!commit?.slice(2).some((p) => tips.get(p) === m.result.agent))
      problems.push(`${m.result.agent}: recorded merge ${m.result.commit} is not its merge in git`)
  }

  // the worktrees are the three the session made, complete, and nothing else is left
  const dir = worktreeDir(r)
  const listed = sh(r.repo, "worktree", "list", "--porcelain")
  if (/\nlocked|\nprunable/.test(listed)) problems.push(`worktree list:\n${listed}`)
  const paths = worktreePaths(r.repo).sort()
  const want = [r.repo, ...WORKERS.map((w) => path.join(dir, w))].sort()
  if (JSON.stringify(paths) !== JSON.stringify(want)) problems.push(`worktrees: ${paths.join(", ")}`)
  const left = fs.readdirSync(dir).sort()
  if (JSON.stringify(left) !== JSON.stringify(WORKERS)) problems.push(`in the session folder: ${left.join(", ")}`)
  for (const w of WORKERS) {
    const st = sh(path.join(dir, w), "status", "--porcelain")
    if (st !== "") problems.push(`${w}'s worktree is not clean:\n${st}`)
  }

  // the log replays exactly, without git
  const replay = await Effect.runPromise(
    SessionRuntime.replay({
      session: r.session,
      dir: r.state,
      verify: true,
      plugins: [WorktreePlugin.make({ repo: r.repo, sessionId: r.session, replaying: true })]
    }).pipe(Effect.either)
  )
  if (replay._tag === "Left") problems.push(`replay --verify: ${String((replay.left as Error).message ?? replay.left)}`)
  else if (replay.right.matched !== events.length)
    problems.push(`replay matched ${replay.right.matched} of ${events.length}`)

  // and cleaning up leaves the repository as it was
  await Effect.runPromise(
    Effect.flatMap(Worktrees.make({ repo: r.repo, sessionId: r.session }), (wt) => wt.cleanup()) as Effect.Effect<
      void,
      unknown
    >
  )
  if (worktreePaths(r.repo).length !== 1) problems.push("worktrees left after cleanup")
  if (fs.existsSync(path.dirname(dir))) problems.push("the worktree folder is left after cleanup")
  return problems
}
