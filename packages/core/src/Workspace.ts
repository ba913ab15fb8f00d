/**
 * The root an agent may touch, and the path resolution that refuses to leave it.
 *
 * Tools never open a path the model gave them directly: they ask `Workspace.resolve`, which refuses
 * `..` escapes, absolute paths outside the root and symlinks that lead out. The Node layer (in
 * `@musekit/node`) checks symlinks against the real file system; the worktree plugin provides one
 * workspace per writing agent.
 *
 * @example
 * ```ts
 * import { Workspace } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const abs = Effect.flatMap(Workspace.Workspace, (ws) => ws.resolve("src/index.ts"))
 * ```
 */
import { Context, Effect, Layer, Schema } from "effect"

export class PathEscape extends Schema.TaggedError<PathEscape>("@musekit/core/PathEscape")("PathEscape", {
  path: Schema.String,
  root: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `path ${this.path} is outside the workspace ${this.root} (${this.reason}); nothing was read or written`
  }
}

export interface Service {
  /** Absolute, real path of the root. */
  readonly root: string
  /** Resolve a path given by a model or user to an absolute path inside the root, or fail. */
  readonly resolve: (path: string) => Effect.Effect<string, PathEscape>
  /** The path relative to the root, for display and events. */
  readonly relative: (absolute: string) => string
  /**
   * Content hashes (sha256 hex, `null` for a missing file) of workspace-relative paths; recorded
   * before a write or exec tool runs so that resume can tell whether an interrupted write happened.
   */
  readonly fingerprint: (paths: ReadonlyArray<string>) => Effect.Effect<Record<string, string | null>>
  /** The bytes of a workspace-relative file, `null` when it does not exist (used to snapshot before writes). */
  readonly read: (path: string) => Effect.Effect<Uint8Array | null, PathEscape>
  /** Put a file back to given bytes, or remove it for `null`; `false` when that failed (used to settle an interrupted write). */
  readonly restore: (path: string, bytes: Uint8Array | null) => Effect.Effect<boolean, PathEscape>
  /**
   * The workspace-relative path a write to `path` lands on: symlinks followed (dangling ones too),
   * names as the file system stores them. Lets approvals see that `link/config` is `.git/config`.
   */
  readonly real?: ((path: string) => Effect.Effect<string, PathEscape>) | undefined
  /** Remove what an interrupted write of these paths may have left behind (temporary files). */
  readonly discardPartial?: ((paths: ReadonlyArray<string>) => Effect.Effect<void>) | undefined
}

export class Workspace extends Context.Tag("@musekit/core/Workspace")<Workspace, Service>() {}

/** Normalize a POSIX path lexically (no file system access). */
export const normalize = (p: string): string => {
  const abs = p.startsWith("/")
  const out: Array<string> = []
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue
    if (seg === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop()
      else if (!abs) out.push("..")
    } else out.push(seg)
  }
  return (abs ? "/" : "") + out.join("/")
}

/**
 * Lexical resolution: refuses `..` escapes and absolute paths outside the root. Symlinks are not
 * checked; use the Node layer for a real file system.
 */
export const resolveLexical = (root: string, path: string): Effect.Effect<string, PathEscape> =>
  Effect.suspend(() => {
    const r = normalize(root)
    if (path.includes("\0")) return Effect.fail(new PathEscape({ path, root: r, reason: "NUL byte in path" }))
    const abs = normalize(path.startsWith("/") ? path : `${r}/${path}`)
    if (abs !== r && !abs.startsWith(r === "/" ? "/" : `${r}/`)) {
      return Effect.fail(
        new PathEscape({ path, root: r, reason: path.startsWith("/") ? "absolute path outside" : "'..' leads out" })
      )
    }
    return Effect.succeed(abs)
  })

export const relativeTo = (root: string, absolute: string): string => {
  const r = normalize(root)
  if (absolute === r) return "."
  return absolute.startsWith(`${r}/`) ? absolute.slice(r.length + 1) : absolute
}

/** A workspace with lexical checks only and no files (tests, virtual file systems). */
export const layerLexical = (root: string): Layer.Layer<Workspace> =>
  Layer.succeed(Workspace, {
    root: normalize(root),
    resolve: (p) => resolveLexical(root, p),
    relative: (a) => relativeTo(root, a),
    fingerprint: (paths) => Effect.succeed(Object.fromEntries(paths.map((p) => [p, null]))),
    read: (p) => Effect.as(resolveLexical(root, p), null),
    restore: (p) => Effect.as(resolveLexical(root, p), false)
  })
