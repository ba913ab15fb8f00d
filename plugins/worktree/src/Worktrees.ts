/**
 * A git worktree and a fresh branch per writing agent: allocation that is safe under concurrency,
 * optional sparse checkouts, commits and reviewable diffs, an explicit merge-back that reports
 * conflicts and never leaves the repository half-merged, cleanup, and re-attachment after a crash.
 *
 * Every agent `a` of session `s` gets branch `muse/s/a`, created from the session's base commit (HEAD
 * of the repository when the service is made, or `baseRef`), checked out in
 * `<repo>/../.muse-worktrees/<repo-name>/s/a` (or `<root>/s/a`).
 *
 * @example
 * ```ts
 * import { Worktrees } from "@musekit/plugin-worktree"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const wt = yield* Worktrees.Worktrees
 *   const workers = yield* Effect.forEach(["w1", "w2"], (agent) => wt.allocate({ agent }), {
 *     concurrency: "unbounded"
 *   })
 *   // ... the agents edit files under workers[i].path ...
 *   yield* wt.commit("w1", "Fix the parser")
 *   const review = yield* wt.diff("w1")
 *   const result = yield* wt.merge("w1", { strategy: "merge" })
 *   if (result._tag === "Conflict") console.log(result.files, result.hunks)
 *   yield* wt.cleanup()
 * }).pipe(Effect.provide(Worktrees.layer({ repo: "/path/to/repo", sessionId: "s1" })))
 * ```
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Effect, Either, Exit, Layer, Option, Schema } from "effect"
import { GitFailed, git, gitText, type RunOptions, retryOnLock, run } from "./internal/git.js"
import * as Parse from "./internal/parse.js"
import { isWithin, PathEscape, realPathOf } from "./Paths.js"

export { GitFailed } from "./internal/git.js"

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

/** One agent's worktree. Record it (e.g. in the event log) to `reattach` after a crash. */
export const Allocation = Schema.Struct({
  agent: Schema.String,
  /** Absolute path of the worktree. */
  path: Schema.String,
  /** Branch name (without `refs/heads/`). */
  branch: Schema.String,
  /** Commit the branch was created from. */
  base: Schema.String,
  /** Sparse-checkout patterns, when the worktree is sparse. */
  paths: Schema.optional(Schema.Array(Schema.String))
})
export type Allocation = typeof Allocation.Type

/**
 * What to do when the main checkout has uncommitted changes at allocation time:
 * - `ignore` (default): workers start from the base commit only; local edits stay where they are.
 * - `refuse`: `allocate` fails with {@link DirtyCheckout} naming the dirty files.
 * - `carry`: the tracked diff against HEAD and the untracked (not ignored) files are applied into
 *   each new worktree, uncommitted.
 */
export const DirtyPolicy = Schema.Literal("ignore", "refuse", "carry")
export type DirtyPolicy = typeof DirtyPolicy.Type

export const MergeStrategy = Schema.Literal("merge", "cherry-pick")
export type MergeStrategy = typeof MergeStrategy.Type

/** One conflict region, taken from the conflicted file before the merge was aborted. */
export const Hunk = Schema.Struct({
  file: Schema.String,
  /** 1-based line of the region in the conflicted file (0 when the whole file conflicts). */
  line: Schema.Number,
  /** The target branch's side. */
  ours: Schema.String,
  /** The worker's side. */
  theirs: Schema.String,
  /** The common ancestor's text, when git could provide it. */
  base: Schema.optional(Schema.String)
})
export type Hunk = typeof Hunk.Type

export const Merged = Schema.TaggedStruct("Merged", {
  agent: Schema.String,
  into: Schema.String,
  strategy: MergeStrategy,
  /** The target branch's commit after the merge (unchanged when there was nothing to merge). */
  commit: Schema.String,
  /** Whether the target branch moved. */
  changed: Schema.Boolean
})
export type Merged = typeof Merged.Type

export const Conflict = Schema.TaggedStruct("Conflict", {
  agent: Schema.String,
  into: Schema.String,
  strategy: MergeStrategy,
  files: Schema.Array(Schema.String),
  hunks: Schema.Array(Hunk)
})
export type Conflict = typeof Conflict.Type

export const MergeResult = Schema.Union(Merged, Conflict)
export type MergeResult = typeof MergeResult.Type

/** What `observeMerge` sees before a merge: the target branch and its commit, the agent's branch tip (`null`: unknown). */
export interface MergeObservation {
  readonly into: string | null
  readonly head: string | null
  readonly tip: string | null
}

/** Whether a merge the session stopped in the middle of is in the target branch (`settleMerge`). */
export type MergeSettlement = { readonly _tag: "Landed"; readonly result: Merged } | { readonly _tag: "NotLanded" }

export const ReattachStatus = Schema.Literal("attached", "recreated", "recreated-from-base")
export type ReattachStatus = typeof ReattachStatus.Type

export const Reattached = Schema.Struct({ ...Allocation.fields, status: ReattachStatus })
export type Reattached = typeof Reattached.Type

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

export class InvalidName extends Schema.TaggedError<InvalidName>("@musekit/plugin-worktree/InvalidName")(
  "InvalidName",
  { kind: Schema.String, name: Schema.String }
) {
  override get message() {
    return `invalid ${this.kind} name ${JSON.stringify(this.name)}: use letters, digits, ".", "_" and "-" (at most 64, not starting with "." or "-", not ending in ".lock")`
  }
}

export class NotARepository extends Schema.TaggedError<NotARepository>("@musekit/plugin-worktree/NotARepository")(
  "NotARepository",
  { path: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `${this.path} is not a usable git checkout: ${this.reason}`
  }
}

export class BaseNotFound extends Schema.TaggedError<BaseNotFound>("@musekit/plugin-worktree/BaseNotFound")(
  "BaseNotFound",
  { ref: Schema.String, repo: Schema.String }
) {
  override get message() {
    return `base ${this.ref} does not name a commit in ${this.repo} (a repository needs at least one commit)`
  }
}

export class UnknownAgent extends Schema.TaggedError<UnknownAgent>("@musekit/plugin-worktree/UnknownAgent")(
  "UnknownAgent",
  { agent: Schema.String, session: Schema.String }
) {
  override get message() {
    return `agent ${this.agent} has no worktree in session ${this.session}; allocate or reattach it first`
  }
}

export class BranchExists extends Schema.TaggedError<BranchExists>("@musekit/plugin-worktree/BranchExists")(
  "BranchExists",
  { agent: Schema.String, branch: Schema.String }
) {
  override get message() {
    return `branch ${this.branch} for agent ${this.agent} already exists: reattach the earlier allocation or release it first`
  }
}

/** A checkout has uncommitted changes where the operation needs a clean one. */
export class DirtyCheckout extends Schema.TaggedError<DirtyCheckout>("@musekit/plugin-worktree/DirtyCheckout")(
  "DirtyCheckout",
  { path: Schema.String, files: Schema.Array(Schema.String), operation: Schema.Literal("allocate", "merge") }
) {
  override get message() {
    const shown = this.files.slice(0, 20).join(", ") + (this.files.length > 20 ? `, … (${this.files.length})` : "")
    return this.operation === "allocate"
      ? `the main checkout ${this.path} has uncommitted changes (${shown}) and the dirty policy is "refuse": commit or stash them, or use dirty: "ignore" or "carry"`
      : `refusing to merge into ${this.path}: it has uncommitted changes or an operation in progress (${shown}); commit, stash or finish them first`
  }
}

export class CarryFailed extends Schema.TaggedError<CarryFailed>("@musekit/plugin-worktree/CarryFailed")(
  "CarryFailed",
  { agent: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `could not carry the main checkout's uncommitted changes into the worktree of ${this.agent}: ${this.reason}`
  }
}

export class UncommittedWork extends Schema.TaggedError<UncommittedWork>("@musekit/plugin-worktree/UncommittedWork")(
  "UncommittedWork",
  { agent: Schema.String, files: Schema.Array(Schema.String) }
) {
  override get message() {
    return `the worktree of ${this.agent} has uncommitted changes (${this.files.slice(0, 20).join(", ")}); commit them first, only commits are merged`
  }
}

export class MergeTargetUnavailable extends Schema.TaggedError<MergeTargetUnavailable>(
  "@musekit/plugin-worktree/MergeTargetUnavailable"
)("MergeTargetUnavailable", { into: Schema.String, reason: Schema.String }) {
  override get message() {
    return `cannot merge into ${this.into || "the main checkout"}: ${this.reason}`
  }
}

export class MergeFailed extends Schema.TaggedError<MergeFailed>("@musekit/plugin-worktree/MergeFailed")(
  "MergeFailed",
  { agent: Schema.String, into: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `merging ${this.agent} into ${this.into} failed: ${this.reason}`
  }
}

/**
 * A worker's worktree no longer points at the git directory muse made for it (its `.git` file was
 * rewritten, replaced or removed): git run there would act on another repository, so muse refuses.
 */
export class WorktreeTampered extends Schema.TaggedError<WorktreeTampered>("@musekit/plugin-worktree/WorktreeTampered")(
  "WorktreeTampered",
  { agent: Schema.String, path: Schema.String, found: Schema.String, expected: Schema.String }
) {
  override get message() {
    return `the worktree of ${this.agent} at ${this.path} no longer belongs to muse: its .git ${this.found} instead of pointing at ${this.expected}. Refusing to run git there, so nothing lands in another repository; put it back with \`printf 'gitdir: ${this.expected}\\n' > ${path.join(this.path, ".git")}\` (or remove the worktree) and try again`
  }
}

export type WorktreeError =
  | GitFailed
  | WorktreeTampered
  | InvalidName
  | NotARepository
  | BaseNotFound
  | UnknownAgent
  | BranchExists
  | DirtyCheckout
  | CarryFailed
  | UncommittedWork
  | MergeTargetUnavailable
  | MergeFailed
  | PathEscape

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

export interface AllocateRequest {
  readonly agent: string
  /** Sparse-checkout patterns (gitignore syntax, `--no-cone`); only matching files are checked out. */
  readonly paths?: ReadonlyArray<string> | undefined
}

export interface MergeOptions {
  /** `merge` (default): a `--no-ff` merge commit; `cherry-pick`: the worker's commits, replayed with `-x`. */
  readonly strategy?: MergeStrategy | undefined
  /** Target branch; default the branch checked out in the main checkout. */
  readonly into?: string | undefined
  /** Message of the merge commit (strategy `merge`). */
  readonly message?: string | undefined
}

export interface Service {
  /** Top level of the main checkout. */
  readonly repo: string
  readonly sessionId: string
  /** Commit new allocations start from. */
  readonly base: string
  /** Directory holding this session's worktrees (`<root>/<sessionId>`). */
  readonly dir: string
  readonly dirty: DirtyPolicy
  /** The allocation `allocate` would make, without touching the repository (for write-ahead logging). */
  readonly plan: (request: AllocateRequest) => Effect.Effect<Allocation, InvalidName>
  /** Create (or return the existing) worktree of an agent. Safe to call for many agents at once. */
  readonly allocate: (request: AllocateRequest) => Effect.Effect<Allocation, WorktreeError>
  readonly get: (agent: string) => Effect.Effect<Allocation, UnknownAgent>
  readonly list: Effect.Effect<ReadonlyArray<Allocation>>
  /** Commit everything in the agent's worktree as `muse <agent>`; none when nothing changed. */
  readonly commit: (agent: string, message: string) => Effect.Effect<Option.Option<string>, WorktreeError>
  /** Unified diff of the agent's work (commits and uncommitted changes, untracked files included) against its base. */
  readonly diff: (agent: string) => Effect.Effect<string, WorktreeError>
  /** Merge the agent's commits back; a conflict is aborted and reported, never left in the repository. */
  readonly merge: (agent: string, options?: MergeOptions) => Effect.Effect<MergeResult, WorktreeError>
  /** Before a merge: the target and the commits it will be judged by after a crash (never fails). */
  readonly observeMerge: (agent: string, options?: MergeOptions) => Effect.Effect<MergeObservation>
  /**
   * After a crash during a merge of `agent` (given what `observeMerge` saw before it): put back
   * what a merge killed half-way left, then say whether the merge is in the target — `Landed` with
   * the result it had (the merge commit found in git), or `NotLanded` (merging again is safe).
   */
  readonly settleMerge: (
    agent: string,
    options: MergeOptions | undefined,
    observed: MergeObservation | undefined
  ) => Effect.Effect<MergeSettlement, WorktreeError>
  /** Remove the agent's worktree and (unless `keepBranch`) its branch. */
  readonly release: (agent: string, options?: { readonly keepBranch?: boolean }) => Effect.Effect<void, WorktreeError>
  /** Remove every worktree and (unless `keepBranches`) every branch of the session, then prune. */
  readonly cleanup: (options?: { readonly keepBranches?: boolean }) => Effect.Effect<void, WorktreeError>
  /** After a crash: keep worktrees that survived intact, recreate the others, prune stale entries. */
  readonly reattach: (records: ReadonlyArray<Allocation>) => Effect.Effect<ReadonlyArray<Reattached>, WorktreeError>
}

export class Worktrees extends Context.Tag("@musekit/plugin-worktree/Worktrees")<Worktrees, Service>() {}

export interface Options {
  /** Any directory inside the main checkout. */
  readonly repo: string
  readonly sessionId: string
  /** Commit (or ref) new worktrees start from; default HEAD at the time the service is made. */
  readonly baseRef?: string | undefined
  /** Directory for session worktree folders; default `<repo>/../.muse-worktrees/<repo-name>`. */
  readonly root?: string | undefined
  /** Policy for uncommitted changes in the main checkout; default `ignore`. */
  readonly dirty?: DirtyPolicy | undefined
  /** First branch name segment; default `muse`. */
  readonly branchPrefix?: string | undefined
  /** How many worktrees may check out their files at the same time; default twice the CPU count. */
  readonly checkoutConcurrency?: number | undefined
  /** `layer` only: run `cleanup()` when the layer's scope closes. Default false (worktrees survive for resume). */
  readonly cleanupOnClose?: boolean | undefined
}

const NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/
const validName = (kind: string, name: string) =>
  NAME.test(name) && !name.endsWith(".lock") && !name.includes("..")
    ? Effect.void
    : Effect.fail(new InvalidName({ kind, name }))

const MARKER = "muse-allocation.json"
const IN_PROGRESS = ["MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "sequencer", "rebase-merge", "rebase-apply"]

/** What a linked worktree's `.git` is: a file naming its git directory (absolute), or what is wrong with it. */
const pointerOf = (worktree: string): { readonly gitdir: string } | { readonly problem: string } => {
  const file = path.join(worktree, ".git")
  let st: fs.Stats
  try {
    st = fs.lstatSync(file)
  } catch {
    return { problem: "is missing" }
  }
  if (st.isSymbolicLink()) return { problem: "is a symbolic link" }
  if (st.isDirectory()) return { problem: "is a directory (a repository of its own)" }
  if (!st.isFile() || st.size > 4096) return { problem: "is not a small regular file" }
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch (e) {
    return { problem: `cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})` }
  }
  // exactly what `git worktree add` writes: one `gitdir:` line
  const m = /^gitdir: ([^\n\r]+)\r?\n?$/.exec(text)
  if (!m) return { problem: "does not hold a single `gitdir:` line" }
  return { gitdir: path.resolve(worktree, m[1]!.trim()) }
}

/** Absolute admin directory of a linked worktree, read from its `.git` file. */
const adminDir = (worktree: string): string | undefined => {
  const p = pointerOf(worktree)
  return "gitdir" in p ? p.gitdir : undefined
}

/** Remove a lock file a killed git left behind, after giving a git that may still hold it `graceMs` to finish. */
const clearStaleLock = (file: string, graceMs = 1000) =>
  Effect.gen(function* () {
    const started = Date.now()
    while (true) {
      let st: fs.Stats
      try {
        st = fs.statSync(file)
      } catch {
        return
      }
      const now = Date.now()
      if (now - st.mtimeMs >= graceMs || now - started >= graceMs) {
        fs.rmSync(file, { force: true })
        return
      }
      yield* Effect.sleep("25 millis")
    }
  })

const samePath = (a: string, b: string) => {
  if (path.resolve(a) === path.resolve(b)) return true
  try {
    return realPathOf(a) === realPathOf(b)
  } catch {
    return false
  }
}

/** Escape a literal path for a non-cone sparse-checkout pattern anchored at the top. */
const literalPattern = (file: string) => "/" + file.replace(/[\\*?[\]!#]/g, (c) => `\\${c}`)

interface CarrySnapshot {
  readonly patch: Buffer
  readonly changed: ReadonlyArray<string>
  readonly untracked: ReadonlyArray<string>
}

/** Build the service. Nothing is created until the first `allocate`. */
export const make = (options: Options): Effect.Effect<Service, WorktreeError> =>
  Effect.gen(function* () {
    const sessionId = options.sessionId
    const prefix = options.branchPrefix ?? "muse"
    const dirtyPolicy = options.dirty ?? "ignore"
    yield* validName("session", sessionId)
    yield* validName("branch prefix", prefix)
    const cwd = path.resolve(options.repo)
    if (!fs.existsSync(cwd)) return yield* new NotARepository({ path: cwd, reason: "the directory does not exist" })
    const baseRef = options.baseRef ?? "HEAD"
    // the checkout and the base commit, asked of two git processes at once (a session starts sooner);
    // the checkout's answer is judged first, whichever ends first
    const [located, resolved] = yield* Effect.all(
      [
        Effect.either(
          gitText(["rev-parse", "--show-toplevel", "--git-common-dir", "--absolute-git-dir"], {
            cwd,
            optionalLocks: false
          })
        ),
        Effect.either(
          gitText(["rev-parse", "--verify", "--quiet", `${baseRef}^{commit}`], { cwd, optionalLocks: false })
        )
      ],
      { concurrency: 2 }
    )
    if (Either.isLeft(located)) {
      const e = located.left
      return yield* new NotARepository({ path: cwd, reason: e.stderr.trim() || "not inside a git working tree" })
    }
    const info = located.right
    const [repo, commonDirRaw, mainGitDir] = info.split("\n") as [string, string, string]
    const commonDir = path.resolve(cwd, commonDirRaw)
    if (!repo) return yield* new NotARepository({ path: cwd, reason: "a bare repository has no checkout" })
    if (Either.isLeft(resolved)) return yield* new BaseNotFound({ ref: baseRef, repo })
    const base = resolved.right
    const root = path.resolve(options.root ?? path.join(repo, "..", ".muse-worktrees", path.basename(repo)))
    const dir = path.join(root, sessionId)
    const branchRefPrefix = `refs/heads/${prefix}/${sessionId}/`
    // worktrees placed inside the main checkout must not count as its own changes
    const excludeRoot = isWithin(repo, root) && root !== repo ? [`:(exclude)${path.relative(repo, root)}`] : []

    const lock = yield* Effect.makeSemaphore(1)
    const serialized = lock.withPermits(1)
    const checkouts = yield* Effect.makeSemaphore(
      Math.max(1, Math.floor(options.checkoutConcurrency ?? 2 * os.availableParallelism()))
    )
    const state = new Map<string, Allocation>()
    /** Each allocated agent's admin directory (`<common>/worktrees/<name>`), which its `.git` must point at. */
    const admins = new Map<string, string>()
    let worktreeConfigBefore: boolean | undefined

    const inRepo = { cwd: repo }
    const readOnly = (at: string) => ({ cwd: at, optionalLocks: false })

    // -- who owns a worktree ----------------------------------------------------------------------

    /** The admin directory git keeps for the worktree at `p`, found from git's side (not from the worktree's `.git`). */
    const registeredAdmin = (p: string): string | undefined => {
      for (const admin of listDirs(path.join(commonDir, "worktrees"))) {
        try {
          const gitdir = fs.readFileSync(path.join(admin, "gitdir"), "utf8").trim()
          if (samePath(path.dirname(path.resolve(admin, gitdir)), p)) return admin
        } catch {}
      }
      return undefined
    }

    /** Whether `admin` holds the completion marker muse wrote for `a` (same agent, same branch). */
    const markedFor = (admin: string, a: Allocation) => {
      try {
        const m = JSON.parse(fs.readFileSync(path.join(admin, MARKER), "utf8")) as Partial<Allocation>
        return m.agent === a.agent && m.branch === a.branch
      } catch {
        return false
      }
    }

    /** The allocation a marker records, if it is one. */
    const markerOf = (admin: string): Allocation | undefined => {
      try {
        const m = JSON.parse(fs.readFileSync(path.join(admin, MARKER), "utf8")) as unknown
        return Schema.is(Allocation)(m) ? m : undefined
      } catch {
        return undefined
      }
    }

    /** What is wrong with the `.git` of `a`'s worktree (it must point at `admin`), if anything. */
    const pointerProblem = (a: Allocation, admin: string): string | undefined => {
      const p = pointerOf(a.path)
      if ("problem" in p) return p.problem
      return samePath(p.gitdir, admin) ? undefined : `points at ${p.gitdir}`
    }

    /** A complete worktree: known to the service, with the admin directory its `.git` must name. */
    const remember = (a: Allocation, admin: string) => {
      state.set(a.agent, a)
      admins.set(a.agent, admin)
    }

    /**
     * How to run git in the worktree of `a`: only once its `.git` is verified to point at the admin
     * directory muse made for it, and then with that directory given explicitly (`GIT_DIR`,
     * `GIT_WORK_TREE`), so a `.git` rewritten in between is not even read.
     */
    const inWorktree = (
      a: Allocation,
      options: { readonly readOnly?: boolean; readonly env?: Record<string, string> } = {}
    ) =>
      Effect.suspend(() => {
        const admin = admins.get(a.agent) ?? registeredAdmin(a.path)
        const problem = admin === undefined ? "has no admin directory muse made" : pointerProblem(a, admin)
        if (problem !== undefined || admin === undefined)
          return Effect.fail(
            new WorktreeTampered({ agent: a.agent, path: a.path, found: problem ?? "", expected: admin ?? "(none)" })
          )
        return Effect.succeed({
          cwd: a.path,
          env: { GIT_DIR: admin, GIT_WORK_TREE: a.path, ...options.env },
          ...(options.readOnly ? { optionalLocks: false } : {})
        })
      })

    /** Why the main checkout no longer points at the git directory it had when the service was made, if it does not. */
    const mainProblem = (): string | undefined => {
      const dotGit = path.join(repo, ".git")
      let st: fs.Stats
      try {
        st = fs.lstatSync(dotGit)
      } catch {
        return `${dotGit} is missing`
      }
      if (st.isDirectory()) return samePath(dotGit, mainGitDir) ? undefined : `${dotGit} is not ${mainGitDir}`
      const p = pointerOf(repo)
      if ("problem" in p) return `${dotGit} ${p.problem}`
      return samePath(p.gitdir, mainGitDir) ? undefined : `${dotGit} points at ${p.gitdir} instead of ${mainGitDir}`
    }

    const plan = (request: AllocateRequest) =>
      Effect.map(validName("agent", request.agent), (): Allocation => {
        const sparse = request.paths !== undefined && request.paths.length > 0
        return {
          agent: request.agent,
          path: path.join(dir, request.agent),
          branch: `${prefix}/${sessionId}/${request.agent}`,
          base,
          ...(sparse ? { paths: [...request.paths!] } : {})
        }
      })

    const get = (agent: string) =>
      Effect.suspend(() => {
        const a = state.get(agent)
        return a ? Effect.succeed(a) : Effect.fail(new UnknownAgent({ agent, session: sessionId }))
      })

    const branchExists = (branch: string) =>
      Effect.map(run(["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`], readOnly(repo)), (r) => r.code === 0)

    const listWorktrees = Effect.map(git(["worktree", "list", "--porcelain", "-z"], readOnly(repo)), (r) =>
      Parse.worktreeList(r.stdout)
    )

    const prune = retryOnLock(git(["worktree", "prune"], inRepo))

    /** Remove a directory we own (inside the session root) that git no longer tracks. */
    const removeDir = (p: string) =>
      Effect.suspend(() => {
        if (!isWithin(root, path.resolve(p)) || path.resolve(p) === root)
          return Effect.fail(new PathEscape({ path: p, root }))
        return Effect.sync(() => fs.rmSync(p, { recursive: true, force: true }))
      })

    const removeWorktree = (p: string) =>
      Effect.gen(function* () {
        const r = yield* retryOnLock(
          Effect.flatMap(run(["worktree", "remove", "--force", "--force", p], inRepo), (r) =>
            r.code === 0 || /is not a working tree|No such file or directory|does not exist/.test(r.stderr)
              ? Effect.succeed(r)
              : Effect.fail(
                  new GitFailed({
                    args: ["worktree", "remove", "--force", "--force", p],
                    cwd: repo,
                    exitCode: r.code,
                    stderr: r.stderr
                  })
                )
          )
        )
        if (r.code !== 0 || fs.existsSync(p)) yield* removeDir(p)
      })

    const deleteBranches = (branches: ReadonlyArray<string>) =>
      Effect.forEach(
        chunks(branches, 200),
        (names) =>
          retryOnLock(
            Effect.flatMap(run(["branch", "-D", "-q", ...names], inRepo), (r) =>
              r.code === 0 || /not found/.test(r.stderr)
                ? Effect.void
                : Effect.fail(
                    new GitFailed({ args: ["branch", "-D", ...names], cwd: repo, exitCode: r.code, stderr: r.stderr })
                  )
            )
          ),
        { discard: true }
      )

    // -- dirty main checkout --------------------------------------------------------------------

    /** Changed (and, with `untracked`, new) files of the checkout `at` runs in. */
    const dirtyFiles = (at: string | RunOptions, untracked: boolean) => {
      const opts: RunOptions = typeof at === "string" ? readOnly(at) : at
      return Effect.map(
        git(
          [
            "status",
            "--porcelain=v1",
            "-z",
            `--untracked-files=${untracked ? "normal" : "no"}`,
            "--",
            ".",
            ...(opts.cwd === repo ? excludeRoot : [])
          ],
          opts
        ),
        (r) => Parse.statusPaths(r.stdout)
      )
    }

    const carrySnapshot = Effect.gen(function* () {
      const hasHead = (yield* run(["rev-parse", "--verify", "--quiet", "HEAD"], readOnly(repo))).code === 0
      const against = hasHead ? "HEAD" : base
      const patch = (yield* git(
        ["diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", against],
        readOnly(repo)
      )).stdoutBytes
      const changed = Parse.nulList(
        (yield* git(["diff", "--name-only", "--no-renames", "--no-ext-diff", "-z", against], readOnly(repo))).stdout
      )
      const untracked = Parse.nulList(
        (yield* git(["ls-files", "--others", "--exclude-standard", "-z", "--", ".", ...excludeRoot], readOnly(repo)))
          .stdout
      ).filter((f) => !f.endsWith("/"))
      return { patch, changed, untracked } satisfies CarrySnapshot
    })

    const applyCarry = (a: Allocation, snap: CarrySnapshot) =>
      Effect.gen(function* () {
        if (snap.patch.length > 0) {
          const r = yield* run(["apply", "--whitespace=nowarn", "-"], { cwd: a.path, input: snap.patch })
          if (r.code !== 0)
            return yield* new CarryFailed({
              agent: a.agent,
              reason: `the tracked changes do not apply to the base commit ${a.base.slice(0, 12)}: ${r.stderr.trim()}`
            })
        }
        yield* Effect.try({
          try: () => {
            for (const f of snap.untracked) {
              const dst = path.join(a.path, f)
              fs.mkdirSync(path.dirname(dst), { recursive: true })
              fs.cpSync(path.join(repo, f), dst, { verbatimSymlinks: true, force: true })
            }
          },
          catch: (e) => new CarryFailed({ agent: a.agent, reason: `copying untracked files: ${String(e)}` })
        })
      })

    // -- creation pipeline ----------------------------------------------------------------------

    /**
     * Phase 1 (serialized, retried on lock contention): register the worktree without checking
     * out files, and configure sparse checkout. Returns whether this call created the branch.
     */
    const register = (
      a: Allocation,
      fromBase: boolean,
      extraPatterns: ReadonlyArray<string>,
      restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    ) =>
      // waiting for the lock may be interrupted; once git starts, the step runs to its end
      Effect.zipRight(
        restore(lock.take(1)),
        Effect.gen(function* () {
          let createBranch = fromBase
          let retrying = false
          const attempt = Effect.gen(function* () {
            if (retrying) {
              // a failed `worktree add -b` may have created the branch (pointing at base) or the directory
              yield* prune
              if (fs.existsSync(a.path)) yield* removeWorktree(a.path)
              if (createBranch && (yield* branchExists(a.branch))) createBranch = false
            }
            retrying = true
            const args = createBranch
              ? ["worktree", "add", "--no-checkout", "-b", a.branch, a.path, a.base]
              : ["worktree", "add", "--no-checkout", a.path, a.branch]
            const r = yield* run(args, inRepo)
            if (r.code === 0) return
            if (createBranch && /a branch named '.*' already exists/.test(r.stderr))
              return yield* new BranchExists({ agent: a.agent, branch: a.branch })
            return yield* new GitFailed({ args, cwd: repo, exitCode: r.code, stderr: r.stderr })
          })
          yield* retryOnLock(attempt)
          const createdBranch = fromBase
          if (a.paths !== undefined) {
            if (worktreeConfigBefore === undefined)
              worktreeConfigBefore =
                (yield* run(["config", "--local", "--get", "extensions.worktreeConfig"], readOnly(repo))).code === 0
            const patterns = [...a.paths, ...extraPatterns].join("\n") + "\n"
            yield* retryOnLock(
              git(["sparse-checkout", "set", "--no-cone", "--stdin"], { cwd: a.path, input: patterns })
            ).pipe(Effect.tapError(() => rollback(a, createdBranch)))
          }
          return createdBranch
        }).pipe(Effect.ensuring(lock.release(1)))
      )

    const rollback = (a: Allocation, deleteBranch: boolean) =>
      Effect.gen(function* () {
        yield* removeWorktree(a.path)
        if (deleteBranch) yield* deleteBranches([a.branch])
        yield* prune
      }).pipe(Effect.ignoreLogged)

    /** Phase 2 (concurrent): check out the files, carry local changes, mark the worktree complete. */
    const populate = (a: Allocation, carry: CarrySnapshot | undefined) =>
      Effect.gen(function* () {
        yield* checkouts.withPermits(1)(
          retryOnLock(git(["reset", "--hard", "--quiet", "--no-recurse-submodules"], { cwd: a.path }))
        )
        if (carry) yield* applyCarry(a, carry)
        const admin = adminDir(a.path)
        if (!admin)
          return yield* new WorktreeTampered({ agent: a.agent, path: a.path, found: "is missing", expected: "(new)" })
        yield* Effect.sync(() => fs.writeFileSync(path.join(admin, MARKER), JSON.stringify(a) + "\n"))
        return admin
      })

    /** Register, then populate; an allocation that fails or is interrupted half-way is rolled back. */
    const create = (a: Allocation, fromBase: boolean, carry: CarrySnapshot | undefined) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const extra = carry && a.paths ? [...carry.changed, ...carry.untracked].map(literalPattern) : []
          const createdBranch = yield* register(a, fromBase, extra, restore)
          const admin = yield* restore(populate(a, carry)).pipe(
            Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : serialized(rollback(a, createdBranch))))
          )
          remember(a, admin)
          return a
        })
      )

    /**
     * The allocation an earlier (killed) run made for the agent of `a`: as its completion marker
     * records it, else from the branch (created at that run's base; nothing ran on it yet).
     */
    const earlierAllocation = (a: Allocation) =>
      Effect.gen(function* () {
        const admin = registeredAdmin(a.path)
        const marked = admin ? markerOf(admin) : undefined
        if (marked && marked.agent === a.agent && marked.branch === a.branch && samePath(marked.path, a.path))
          return { ...marked, path: a.path } satisfies Allocation
        const forkPoint = yield* run(["merge-base", `refs/heads/${a.branch}`, a.base], readOnly(repo))
        const base = forkPoint.code === 0 && forkPoint.stdout.trim() !== "" ? forkPoint.stdout.trim() : a.base
        return { ...a, base } satisfies Allocation
      })

    const allocate = (request: AllocateRequest) =>
      Effect.gen(function* () {
        const a = yield* plan(request)
        const existing = state.get(a.agent)
        if (existing) return existing
        // a re-run after a crash finds what the killed run made (the branch, the worktree, or part
        // of them): take it back rather than fail on it or start over
        if ((yield* branchExists(a.branch)) || fs.existsSync(a.path) || registeredAdmin(a.path) !== undefined) {
          const [back] = yield* reattach([yield* earlierAllocation(a)])
          const { status: _, ...allocation } = back!
          return allocation satisfies Allocation
        }
        let carry: CarrySnapshot | undefined
        if (dirtyPolicy === "refuse") {
          const files = yield* dirtyFiles(repo, true)
          if (files.length > 0) return yield* new DirtyCheckout({ path: repo, files, operation: "allocate" })
        } else if (dirtyPolicy === "carry") {
          const snap = yield* carrySnapshot
          if (snap.patch.length > 0 || snap.untracked.length > 0) carry = snap
        }
        return yield* create(a, true, carry)
      }).pipe(Effect.withSpan("Worktrees.allocate", { attributes: { agent: request.agent } }))

    // -- commit and diff ------------------------------------------------------------------------

    const commit = (agent: string, message: string) =>
      Effect.gen(function* () {
        const a = yield* get(agent)
        yield* retryOnLock(Effect.flatMap(inWorktree(a), (at) => git(["add", "--all", "--sparse"], at)))
        const staged = yield* Effect.flatMap(inWorktree(a), (at) =>
          run(["diff", "--cached", "--quiet", "--no-ext-diff"], at)
        )
        if (staged.code === 0) return Option.none<string>()
        const env = {
          GIT_AUTHOR_NAME: "muse",
          GIT_AUTHOR_EMAIL: agent,
          GIT_COMMITTER_NAME: "muse",
          GIT_COMMITTER_EMAIL: agent
        }
        yield* retryOnLock(
          Effect.flatMap(inWorktree(a, { env }), (at) => git(["commit", "--no-verify", "--quiet", "-m", message], at))
        )
        return Option.some(
          yield* Effect.flatMap(inWorktree(a, { readOnly: true }), (at) => gitText(["rev-parse", "HEAD"], at))
        )
      })

    const diff = (agent: string) =>
      Effect.gen(function* () {
        const a = yield* get(agent)
        const admin = (yield* inWorktree(a)).env.GIT_DIR
        const tmpIndex = path.join(os.tmpdir(), `muse-diff-${process.pid}-${randomBytes(6).toString("hex")}.index`)
        return yield* Effect.acquireUseRelease(
          Effect.sync(() => {
            const index = admin ? path.join(admin, "index") : undefined
            if (index && fs.existsSync(index)) fs.copyFileSync(index, tmpIndex)
          }),
          () =>
            Effect.gen(function* () {
              // stage everything into a throw-away copy of the index so untracked files show up
              const at = yield* inWorktree(a, { readOnly: true, env: { GIT_INDEX_FILE: tmpIndex } })
              yield* git(["add", "--all", "--sparse"], at)
              const r = yield* git(["diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", a.base], at)
              return r.stdout
            }),
          () => Effect.sync(() => fs.rmSync(tmpIndex, { force: true }))
        )
      })

    // -- merge ----------------------------------------------------------------------------------

    const committerEnv = (at: string) =>
      Effect.map(run(["var", "GIT_COMMITTER_IDENT"], readOnly(at)), (r) =>
        r.code === 0
          ? {}
          : {
              GIT_AUTHOR_NAME: "muse",
              GIT_AUTHOR_EMAIL: "muse@localhost",
              GIT_COMMITTER_NAME: "muse",
              GIT_COMMITTER_EMAIL: "muse@localhost"
            }
      )

    const inProgress = (at: string) =>
      Effect.map(gitText(["rev-parse", "--absolute-git-dir"], readOnly(at)), (gd) =>
        IN_PROGRESS.filter((f) => fs.existsSync(path.join(gd, f)))
      )

    const collectConflict = (at: string, base: { agent: string; into: string; strategy: MergeStrategy }) =>
      Effect.gen(function* () {
        const entries = Parse.unmerged((yield* git(["ls-files", "-u", "-z"], readOnly(at))).stdout)
        const files = [...new Set(entries.map((e) => e.path))]
        const hunks: Array<Hunk> = []
        const blob = (object: string | undefined) =>
          object === undefined
            ? Effect.succeed("")
            : Effect.map(git(["cat-file", "blob", object], readOnly(at)), (r) =>
                r.stdoutBytes.includes(0) ? `(binary, ${r.stdoutBytes.length} bytes)` : r.stdout
              )
        for (const file of files) {
          const abs = path.join(at, file)
          const text = fs.existsSync(abs) && fs.lstatSync(abs).isFile() ? fs.readFileSync(abs, "utf8") : ""
          const marked = Parse.conflictHunks(text)
          if (marked.length > 0) {
            for (const h of marked)
              hunks.push({
                file,
                line: h.line,
                ours: h.ours,
                theirs: h.theirs,
                ...(h.base !== undefined ? { base: h.base } : {})
              })
          } else {
            // no markers (deleted on one side, binary, type change): report the whole stages
            const stage = (n: number) => entries.find((e) => e.path === file && e.stage === n)?.object
            const b = stage(1)
            hunks.push({
              file,
              line: 0,
              ours: yield* blob(stage(2)),
              theirs: yield* blob(stage(3)),
              ...(b !== undefined ? { base: yield* blob(b) } : {})
            })
          }
        }
        return { _tag: "Conflict" as const, ...base, files, hunks }
      })

    const restoreAfter = (at: string, abortArgs: ReadonlyArray<string>, who: { agent: string; into: string }) =>
      Effect.gen(function* () {
        if ((yield* inProgress(at)).length > 0) yield* retryOnLock(git(abortArgs, { cwd: at }))
        const left = [...(yield* inProgress(at)), ...(yield* dirtyFiles(at, false))]
        if (left.length > 0)
          return yield* new MergeFailed({
            ...who,
            reason: `could not restore ${at} after aborting (${left.join(", ")}); inspect it by hand`
          })
      })

    /**
     * The merge in progress, written before git starts and removed when it is over: after a crash
     * it says where the merge ran and what the target was before, so the next merge (or the
     * resume's settlement) can put the target back and clear the locks the killed git left there.
     */
    const ledgerFile = path.join(dir, ".merge-in-progress.json")

    interface Ledger {
      readonly agent: string
      readonly branch: string
      readonly into: string
      /** The checkout the merge ran in. */
      readonly at: string
      /** `at` is a temporary worktree of the target, removed afterwards. */
      readonly temporary: boolean
      /** The target's commit before the merge. */
      readonly before: string
      readonly since: number
    }

    const writeLedger = (l: Ledger) =>
      Effect.sync(() => {
        fs.mkdirSync(dir, { recursive: true })
        const tmp = `${ledgerFile}.${process.pid}.tmp`
        fs.writeFileSync(tmp, JSON.stringify(l))
        fs.renameSync(tmp, ledgerFile)
      })

    const readLedger = (): Ledger | undefined => {
      try {
        const l = JSON.parse(fs.readFileSync(ledgerFile, "utf8")) as Ledger
        return typeof l.at === "string" && typeof l.before === "string" && typeof l.into === "string" ? l : undefined
      } catch {
        return undefined
      }
    }

    const dropLedger = Effect.sync(() => fs.rmSync(ledgerFile, { force: true }))

    /**
     * Put back what a merge killed half-way left (the session's log is locked by one process, so a
     * ledger found here belongs to a run that is gone): locks its git held in the target, a merge or
     * cherry-pick in progress, files written into the target before its commit, a temporary worktree.
     */
    const recoverMerge = Effect.gen(function* () {
      // a ledger write killed before its rename leaves its temporary file
      try {
        for (const f of fs.readdirSync(dir)) {
          if (f.startsWith(".merge-in-progress.json.") && f.endsWith(".tmp"))
            fs.rmSync(path.join(dir, f), { force: true })
        }
      } catch {
        // no session folder yet: nothing was left
      }
      const l = readLedger()
      if (!l) return
      const inPath = (p: string) => isWithin(root, path.resolve(p)) && path.resolve(p) !== root
      // locks the killed git made: not older than the merge
      const ours = (f: string) => {
        try {
          return fs.statSync(f).mtimeMs >= l.since - 1000
        } catch {
          return false
        }
      }
      const refLock = path.join(commonDir, "refs", "heads", `${l.into}.lock`)
      if (l.temporary) {
        if (inPath(l.at)) {
          if (fs.existsSync(l.at) || registeredAdmin(l.at)) yield* removeWorktree(l.at)
          removeStaleAdmin(l.at)
          yield* prune
        }
      } else if (fs.existsSync(l.at)) {
        const gd = samePath(l.at, repo)
          ? mainGitDir
          : yield* gitText(["rev-parse", "--absolute-git-dir"], readOnly(l.at))
        for (const name of ["index.lock", "HEAD.lock", "ORIG_HEAD.lock", "MERGE_HEAD.lock", "AUTO_MERGE.lock"]) {
          if (ours(path.join(gd, name))) yield* clearStaleLock(path.join(gd, name))
        }
        if (ours(refLock)) yield* clearStaleLock(refLock)
        const busy = yield* inProgress(l.at)
        if (busy.includes("MERGE_HEAD")) yield* retryOnLock(git(["merge", "--abort"], { cwd: l.at }))
        else if (busy.length > 0) yield* retryOnLock(git(["cherry-pick", "--abort"], { cwd: l.at }))
        else {
          const head = yield* gitText(["rev-parse", "HEAD"], readOnly(l.at))
          // killed before its commit: the files it wrote are staged and match the index
          if (head === l.before && (yield* dirtyFiles(l.at, false)).length > 0)
            yield* retryOnLock(git(["reset", "--merge", "--quiet"], { cwd: l.at }))
        }
      }
      if (ours(refLock)) yield* clearStaleLock(refLock)
      yield* dropLedger
    })

    const mergeIn = (at: string, a: Allocation, into: string, options: MergeOptions | undefined, temporary: boolean) =>
      Effect.gen(function* () {
        const strategy = options?.strategy ?? "merge"
        const who = { agent: a.agent, into }
        const busy = yield* inProgress(at)
        const dirty = yield* dirtyFiles(at, false)
        if (busy.length > 0 || dirty.length > 0)
          return yield* new DirtyCheckout({ path: at, files: [...busy, ...dirty], operation: "merge" })
        const env = yield* committerEnv(at)
        const before = yield* gitText(["rev-parse", "HEAD"], readOnly(at))
        const conf = ["-c", "merge.conflictStyle=diff3"]
        yield* writeLedger({ agent: a.agent, branch: a.branch, into, at, temporary, before, since: Date.now() })
        let r: { code: number; stderr: string }
        let abortArgs: Array<string>
        if (strategy === "merge") {
          const message = options?.message ?? `Merge branch '${a.branch}' (muse agent ${a.agent})`
          r = yield* retryOnLock(
            Effect.flatMap(
              run([...conf, "merge", "--no-ff", "--no-edit", "--no-stat", "-m", message, `refs/heads/${a.branch}`], {
                cwd: at,
                env
              }),
              (r) =>
                r.code !== 0 && /index\.lock/.test(r.stderr)
                  ? Effect.fail(new GitFailed({ args: ["merge"], cwd: at, exitCode: r.code, stderr: r.stderr }))
                  : Effect.succeed(r)
            )
          )
          abortArgs = ["merge", "--abort"]
        } else {
          const commits = (yield* gitText(
            ["rev-list", "--reverse", "--right-only", "--cherry-pick", "--no-merges", `HEAD...refs/heads/${a.branch}`],
            readOnly(at)
          ))
            .split("\n")
            .filter((s) => s !== "")
          abortArgs = ["cherry-pick", "--abort"]
          if (commits.length === 0) r = { code: 0, stderr: "" }
          else {
            r = yield* run([...conf, "cherry-pick", "-x", ...commits], { cwd: at, env })
            // a commit whose change is already in the target becomes empty: skip it
            for (let i = 0; i < commits.length && r.code !== 0 && /is now empty/.test(r.stderr); i++) {
              if (Parse.unmerged((yield* git(["ls-files", "-u", "-z"], readOnly(at))).stdout).length > 0) break
              r = yield* run([...conf, "cherry-pick", "--skip"], { cwd: at, env })
            }
          }
        }
        if (r.code === 0) {
          const commit = yield* gitText(["rev-parse", "HEAD"], readOnly(at))
          yield* dropLedger
          return { _tag: "Merged" as const, ...who, strategy, commit, changed: commit !== before } satisfies Merged
        }
        const conflicted = Parse.unmerged((yield* git(["ls-files", "-u", "-z"], readOnly(at))).stdout)
        if (conflicted.length === 0) {
          yield* restoreAfter(at, abortArgs, who)
          yield* dropLedger
          return yield* new MergeFailed({ ...who, reason: r.stderr.trim() || `git exited with ${r.code}` })
        }
        const conflict = yield* collectConflict(at, { ...who, strategy })
        yield* restoreAfter(at, abortArgs, who)
        yield* dropLedger
        return conflict satisfies Conflict
      })

    /** The branch checked out in the main checkout, if any. */
    const currentBranch = Effect.map(run(["symbolic-ref", "--quiet", "--short", "HEAD"], readOnly(repo)), (head) =>
      head.code === 0 ? head.stdout.trim() : undefined
    )

    const checkMain = Effect.suspend(() => {
      const problem = mainProblem()
      return problem === undefined
        ? Effect.void
        : Effect.fail(
            new MergeTargetUnavailable({
              into: "",
              reason: `the main checkout no longer points at its own repository (${problem}); refusing to run git there`
            })
          )
    })

    const merge = (agent: string, options?: MergeOptions) =>
      serialized(
        Effect.gen(function* () {
          yield* checkMain
          yield* recoverMerge
          const a = yield* get(agent)
          const pending = yield* dirtyFiles(yield* inWorktree(a, { readOnly: true }), true)
          if (pending.length > 0) return yield* new UncommittedWork({ agent, files: pending })
          let into = options?.into
          if (into === undefined) {
            into = yield* currentBranch
            if (into === undefined)
              return yield* new MergeTargetUnavailable({
                into: "",
                reason: `the main checkout ${repo} is on a detached HEAD; pass \`into\``
              })
          }
          const target = into
          if (!(yield* branchExists(target)))
            return yield* new MergeTargetUnavailable({ into: target, reason: "no such branch" })
          if (target === a.branch)
            return yield* new MergeTargetUnavailable({ into: target, reason: "it is the agent's own branch" })
          const holder = (yield* listWorktrees).find((w) => w.branch === `refs/heads/${target}`)
          if (holder) {
            if (!samePath(holder.path, repo) && isWithin(dir, path.resolve(holder.path)))
              return yield* new MergeTargetUnavailable({
                into: target,
                reason: `it is checked out in the worker worktree ${holder.path}`
              })
            return yield* mergeIn(holder.path, a, target, options, false)
          }
          // the branch is not checked out anywhere: merge in a temporary worktree of it
          const tmp = path.join(dir, `.merge-${agent}-${randomBytes(4).toString("hex")}`)
          return yield* Effect.acquireUseRelease(
            retryOnLock(git(["worktree", "add", "--quiet", tmp, target], inRepo)),
            () => mergeIn(tmp, a, target, options, true),
            () => Effect.zipRight(removeWorktree(tmp), prune).pipe(Effect.ignoreLogged)
          )
        })
      ).pipe(Effect.withSpan("Worktrees.merge", { attributes: { agent } }))

    const observeMerge = (agent: string, options?: MergeOptions) =>
      Effect.gen(function* () {
        const into = options?.into ?? (yield* currentBranch) ?? null
        const at = (ref: string) =>
          Effect.map(run(["rev-parse", "--verify", "--quiet", `${ref}^{commit}`], readOnly(repo)), (r) =>
            r.code === 0 ? r.stdout.trim() : null
          )
        const a = state.get(agent)
        return {
          into,
          head: into === null ? null : yield* at(`refs/heads/${into}`),
          tip: a ? yield* at(`refs/heads/${a.branch}`) : null
        } satisfies MergeObservation
      }).pipe(Effect.orElseSucceed((): MergeObservation => ({ into: null, head: null, tip: null })))

    const settleMerge = (agent: string, options: MergeOptions | undefined, observed: MergeObservation | undefined) =>
      serialized(
        Effect.gen(function* () {
          yield* checkMain
          yield* recoverMerge
          const strategy = options?.strategy ?? "merge"
          const a = yield* get(agent)
          const into = observed?.into ?? options?.into ?? (yield* currentBranch)
          const notLanded = { _tag: "NotLanded" as const }
          if (!into) return notLanded
          const now = yield* run(["rev-parse", "--verify", "--quiet", `refs/heads/${into}^{commit}`], readOnly(repo))
          if (now.code !== 0) return notLanded
          const head = now.stdout.trim()
          const before = observed?.head ?? undefined
          if (before === head) return notLanded
          const tip = yield* gitText(["rev-parse", `refs/heads/${a.branch}`], readOnly(repo))
          // the target moved since the call began: find the commit that brought the agent's branch in
          const range = before ? [`${before}..${head}`] : ["-n", "200", head]
          if (strategy === "merge") {
            const lines = (yield* gitText(["rev-list", "--first-parent", "--parents", ...range], readOnly(repo)))
              .split("\n")
              .map((l) => l.split(" "))
            const found = lines.find((parts) => parts.length >= 3 && parts.slice(2).includes(tip))
            if (found)
              return {
                _tag: "Landed" as const,
                result: {
                  _tag: "Merged" as const,
                  agent,
                  into,
                  strategy,
                  commit: found[0]!,
                  changed: true
                } satisfies Merged
              }
            return notLanded
          }
          // cherry-pick: every change of the branch is in the target now, and the target moved
          if (before === undefined) return notLanded
          const left = yield* gitText(
            ["rev-list", "--right-only", "--cherry-pick", "--no-merges", `${head}...refs/heads/${a.branch}`],
            readOnly(repo)
          )
          const descends = (yield* run(["merge-base", "--is-ancestor", before, head], readOnly(repo))).code === 0
          return left === "" && descends
            ? {
                _tag: "Landed" as const,
                result: { _tag: "Merged" as const, agent, into, strategy, commit: head, changed: true } satisfies Merged
              }
            : notLanded
        })
      ).pipe(Effect.withSpan("Worktrees.settleMerge", { attributes: { agent } }))

    // -- release, cleanup, reattach -------------------------------------------------------------

    const release = (agent: string, options?: { readonly keepBranch?: boolean }) =>
      serialized(
        Effect.gen(function* () {
          const a = yield* get(agent)
          yield* removeWorktree(a.path)
          if (!options?.keepBranch) yield* deleteBranches([a.branch])
          yield* prune
          state.delete(agent)
        })
      )

    const restoreWorktreeConfig = Effect.gen(function* () {
      if (worktreeConfigBefore !== false) return
      // only undo the extension when no remaining worktree (nor the main one) uses per-worktree config
      const admins = [commonDir, ...listDirs(path.join(commonDir, "worktrees"))]
      if (admins.some((d) => fs.existsSync(path.join(d, "config.worktree")))) return
      yield* run(["config", "--local", "--unset", "extensions.worktreeConfig"], inRepo)
      worktreeConfigBefore = undefined
    })

    const cleanup = (opts?: { readonly keepBranches?: boolean }) =>
      serialized(
        Effect.gen(function* () {
          const worktrees = (yield* listWorktrees).slice(1)
          for (const w of worktrees) {
            const ours =
              isWithin(dir, path.resolve(w.path)) ||
              w.branch?.startsWith(branchRefPrefix) === true ||
              [...state.values()].some((a) => samePath(a.path, w.path))
            if (ours) yield* removeWorktree(w.path)
          }
          if (fs.existsSync(dir)) yield* removeDir(dir)
          if (options?.root === undefined) {
            for (const d of [root, path.dirname(root)]) {
              try {
                fs.rmdirSync(d)
              } catch {
                break
              }
            }
          }
          yield* prune
          if (!opts?.keepBranches) {
            const refs = (yield* git(["for-each-ref", "--format=%(refname)", branchRefPrefix], readOnly(repo))).stdout
              .split("\n")
              .filter((r) => r !== "")
            yield* deleteBranches(refs.map((r) => r.slice("refs/heads/".length)))
          }
          yield* restoreWorktreeConfig
          state.clear()
        })
      )

    /** Remove admin folders under `<common>/worktrees` that belong to the worktree at `p`. */
    const removeStaleAdmin = (p: string) => {
      const admins = path.join(commonDir, "worktrees")
      let names: Array<string> = []
      try {
        names = fs.readdirSync(admins)
      } catch {
        return
      }
      for (const name of names) {
        let gitdir: string
        try {
          gitdir = fs.readFileSync(path.join(admins, name, "gitdir"), "utf8").trim()
        } catch {
          continue
        }
        if (samePath(path.dirname(path.resolve(admins, name, gitdir)), p) || path.dirname(gitdir) === p) {
          fs.rmSync(path.join(admins, name), { recursive: true, force: true })
        }
      }
    }

    const reattach = (records: ReadonlyArray<Allocation>) =>
      Effect.gen(function* () {
        for (const r of records) {
          yield* validName("agent", r.agent)
          const abs = path.resolve(r.path)
          if (!isWithin(root, abs) || abs === root || !isWithin(realPathOf(root), realPathOf(abs)))
            return yield* new PathEscape({ path: r.path, root })
        }
        // decide under the lock: what survived intact, what must be rebuilt (and clear its remains)
        const plans = yield* serialized(
          Effect.gen(function* () {
            // a git process killed with the session leaves lock files behind; the refs and worktree
            // folders of this session belong to it alone, so their locks are stale once a git that
            // outlived the session had a moment to finish
            const locks = records.flatMap((r) => {
              const admin =
                registeredAdmin(path.resolve(r.path)) ?? path.join(commonDir, "worktrees", path.basename(r.path))
              return [
                path.join(commonDir, "refs", "heads", `${r.branch}.lock`),
                ...["index.lock", "HEAD.lock", "config.lock"].map((name) => path.join(admin, name))
              ]
            })
            yield* Effect.forEach(locks, (f) => clearStaleLock(f), { concurrency: "unbounded", discard: true })
            yield* prune
            const worktrees = yield* listWorktrees
            const out: Array<{ a: Allocation; status: ReattachStatus; admin?: string }> = []
            for (const r of records) {
              const a: Allocation = {
                agent: r.agent,
                path: path.resolve(r.path),
                branch: r.branch,
                base: r.base,
                ...(r.paths && r.paths.length > 0 ? { paths: [...r.paths] } : {})
              }
              const w = worktrees.find((w) => samePath(w.path, a.path))
              // judged from git's side: the admin folder whose `gitdir` names this path
              const admin = w && registeredAdmin(a.path)
              const intact =
                w !== undefined &&
                w.branch === `refs/heads/${a.branch}` &&
                w.locked !== "initializing" &&
                admin !== undefined &&
                markedFor(admin, a)
              if (intact) {
                const problem = pointerProblem(a, admin)
                if (problem !== undefined) {
                  // its `.git` was rewritten (by whatever ran in it): point it back at its own admin folder
                  yield* Effect.logWarning(`worktree of ${a.agent}: its .git ${problem}; pointing it back at ${admin}`)
                  yield* Effect.sync(() => {
                    fs.rmSync(path.join(a.path, ".git"), { recursive: true, force: true })
                    fs.writeFileSync(path.join(a.path, ".git"), `gitdir: ${admin}\n`)
                  })
                }
                out.push({ a, status: "attached", admin })
                continue
              }
              if (w || fs.existsSync(a.path)) yield* removeWorktree(a.path)
              // a `worktree add` killed mid-way leaves its admin folder locked ("initializing"), which
              // neither remove nor prune clears; left there, the new one would get a second folder
              removeStaleAdmin(a.path)
              out.push({ a, status: (yield* branchExists(a.branch)) ? "recreated" : "recreated-from-base" })
            }
            yield* prune
            return out
          })
        )
        return yield* Effect.forEach(
          plans,
          ({ a, status, admin }) => {
            const done: Reattached = { ...a, status }
            return status === "attached" && admin !== undefined
              ? Effect.sync(() => {
                  remember(a, admin)
                  return done
                })
              : Effect.as(create(a, status === "recreated-from-base", undefined), done)
          },
          { concurrency: "unbounded" }
        )
      })

    return {
      repo,
      sessionId,
      base,
      dir,
      dirty: dirtyPolicy,
      plan,
      allocate,
      get,
      list: Effect.sync(() => [...state.values()]),
      commit,
      diff,
      merge,
      observeMerge,
      settleMerge,
      release,
      cleanup,
      reattach
    } satisfies Service
  })

/**
 * The service as a layer. With `cleanupOnClose`, every worktree and branch of the session is
 * removed when the layer's scope closes; by default they survive so a resumed session can
 * `reattach` them.
 */
export const layer = (options: Options): Layer.Layer<Worktrees, WorktreeError> =>
  Layer.scoped(
    Worktrees,
    Effect.gen(function* () {
      const service = yield* make(options)
      if (options.cleanupOnClose) yield* Effect.addFinalizer(() => Effect.ignoreLogged(service.cleanup()))
      return service
    })
  )

const chunks = <A>(xs: ReadonlyArray<A>, n: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n))
  return out
}

const listDirs = (d: string): Array<string> => {
  try {
    return fs
      .readdirSync(d, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => path.join(d, e.name))
  } catch {
    return []
  }
}
