/**
 * Path isolation for a workspace root (a worker's worktree): every path a tool touches is resolved
 * through {@link resolveInside}, which refuses `..` escapes, absolute paths outside the root and
 * symlinks that lead out of it (checked on the real path of the nearest existing ancestor, so a
 * file that does not exist yet is judged by the directory it would be created in).
 *
 * @example
 * ```ts
 * import { Paths } from "@musekit/plugin-worktree"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const ok = yield* Paths.resolveInside("/work/wt/worker-1", "src/index.ts") // "/work/wt/worker-1/src/index.ts"
 *   const bad = yield* Effect.flip(Paths.resolveInside("/work/wt/worker-1", "../../etc/passwd"))
 *   return [ok, bad.message] // [..., "path ../../etc/passwd is outside the workspace /work/wt/worker-1"]
 * })
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Schema } from "effect"

/** A path resolves outside the workspace root (lexically, or through a symlink). */
export class PathEscape extends Schema.TaggedError<PathEscape>("@musekit/plugin-worktree/PathEscape")("PathEscape", {
  path: Schema.String,
  root: Schema.String
}) {
  override get message() {
    return `path ${this.path} is outside the workspace ${this.root}`
  }
}

/** `child` equals `parent` or lies below it (both absolute and normalized). */
export const isWithin = (parent: string, child: string): boolean => {
  const rel = path.relative(parent, child)
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel))
}

const MAX_LINKS = 40

/**
 * The real path of `p`, following symlinks even when the target (or `p` itself) does not exist:
 * the real path of the nearest existing ancestor joined with the rest. A dangling symlink is
 * followed to where it points, since writing through it would create the file there.
 */
export const realPathOf = (p: string, depth = 0): string => {
  if (depth > MAX_LINKS) throw new Error(`too many levels of symbolic links at ${p}`)
  try {
    return fs.realpathSync.native(p)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code !== "ENOENT" && code !== "ENOTDIR") throw e
  }
  let st: fs.Stats | undefined
  try {
    st = fs.lstatSync(p)
  } catch {
    st = undefined
  }
  if (st?.isSymbolicLink()) {
    const target = path.resolve(path.dirname(p), fs.readlinkSync(p))
    return realPathOf(target, depth + 1)
  }
  const parent = path.dirname(p)
  if (parent === p) return p
  return path.join(realPathOf(parent, depth), path.basename(p))
}

/**
 * Resolve `p` (relative to `root`, or absolute) to an absolute path inside `root`, or fail with
 * {@link PathEscape}. The returned path is lexical (`root` joined with the normalized `p`), so
 * callers keep working in the root they were given even when `root` itself sits behind a symlink.
 */
export const resolveInside = (root: string, p: string): Effect.Effect<string, PathEscape> =>
  Effect.suspend(() => {
    const refuse = Effect.fail(new PathEscape({ path: p, root }))
    if (p.includes("\0") || root.includes("\0")) return refuse
    const absRoot = path.resolve(root)
    const resolved = path.resolve(absRoot, p)
    if (!isWithin(absRoot, resolved)) return refuse
    try {
      const realRoot = realPathOf(absRoot)
      const real = realPathOf(resolved)
      return isWithin(realRoot, real) ? Effect.succeed(resolved) : refuse
    } catch {
      // a symlink loop or an unreadable link: refuse rather than guess
      return refuse
    }
  })
