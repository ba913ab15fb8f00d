/**
 * The `Workspace` service on a real file system.
 *
 * The root is taken by its real path. `resolve` refuses NUL bytes, `..` escapes, absolute paths
 * outside the root and symlinks that lead out: the real path of the target — or, when it does not
 * exist yet, of its nearest existing ancestor, following dangling links — must lie inside the real
 * root. `fingerprint` hashes file contents (sha256 hex), directories by their sorted listing, and
 * gives `null` for missing paths.
 *
 * @example
 * ```ts
 * import { Workspace } from "@musekit/core"
 * import { WorkspaceNode } from "@musekit/node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const ws = yield* Workspace.Workspace
 *   const abs = yield* ws.resolve("src/index.ts")   // fails with PathEscape for "../x" or "/etc/passwd"
 *   return yield* ws.fingerprint(["src/index.ts"])   // { "src/index.ts": "9f86d0…" }
 * }).pipe(Effect.provide(WorkspaceNode.layer(process.cwd())))
 * ```
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Workspace } from "@musekit/core"
import { Effect, Layer, Schema } from "effect"
import { removeLeftovers } from "./internal/atomicWrite.js"

/** The root given for a workspace is missing or not a directory. */
export class InvalidRoot extends Schema.TaggedError<InvalidRoot>("@musekit/node/InvalidRoot")("InvalidRoot", {
  root: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `cannot use ${this.root} as a workspace root: ${this.reason}`
  }
}

const MAX_LINK_DEPTH = 40

const isInside = (realRoot: string, p: string) =>
  p === realRoot || p.startsWith(realRoot === "/" ? "/" : `${realRoot}/`)

const errCode = (e: unknown) => (e as NodeJS.ErrnoException)?.code

/**
 * Why `abs` (lexically inside the root) would lead out of `realRoot` on this file system, or
 * `undefined` when it stays inside. With `anyLink`, any symbolic link on the way (one that stays
 * inside too, or a dangling one) is the reason: for writing where nothing may be followed.
 */
export const symlinkEscape = (
  realRoot: string,
  abs: string,
  options: { readonly anyLink?: boolean | undefined } = {},
  depth = 0
): string | undefined => {
  if (depth > MAX_LINK_DEPTH) return "too many levels of symbolic links"
  try {
    const real = fs.realpathSync(abs)
    if (options.anyLink) return real === abs ? undefined : `a symlink on the path leads to ${real}`
    return isInside(realRoot, real) ? undefined : `a symlink leads to ${real}`
  } catch (e) {
    const code = errCode(e)
    if (code === "ELOOP") return "symlink loop"
    if (code !== "ENOENT" && code !== "ENOTDIR") return `cannot check the path (${code ?? String(e)})`
  }
  // the path does not resolve: a dangling symlink somewhere, or a path not created yet
  let st: fs.Stats
  try {
    st = fs.lstatSync(abs)
  } catch (e) {
    const code = errCode(e)
    if (code !== "ENOENT" && code !== "ENOTDIR") return `cannot check the path (${code ?? String(e)})`
    const parent = path.dirname(abs)
    return parent === abs ? undefined : symlinkEscape(realRoot, parent, options, depth)
  }
  if (!st.isSymbolicLink()) return `cannot check the path (exists but does not resolve)`
  if (options.anyLink) return `a symlink at ${abs}`
  const parent = path.dirname(abs)
  const outParent = symlinkEscape(realRoot, parent, options, depth)
  if (outParent !== undefined) return outParent
  let realParent: string
  let link: string
  try {
    realParent = fs.realpathSync(parent)
    link = fs.readlinkSync(abs)
  } catch (e) {
    return `cannot check the path (${errCode(e) ?? String(e)})`
  }
  const target = path.resolve(realParent, link)
  if (!isInside(realRoot, Workspace.normalize(target))) return `a symlink leads to ${target}`
  return symlinkEscape(realRoot, target, options, depth + 1)
}

/**
 * Where a write to `abs` lands: its real path, or for a path that does not exist yet, the real path
 * of its nearest existing ancestor with the rest appended; a dangling symlink is followed.
 */
export const landingPath = (abs: string, depth = 0): string => {
  try {
    return fs.realpathSync.native(abs)
  } catch {}
  if (depth <= MAX_LINK_DEPTH) {
    try {
      if (fs.lstatSync(abs).isSymbolicLink()) {
        const target = path.resolve(landingPath(path.dirname(abs), depth), fs.readlinkSync(abs))
        return landingPath(target, depth + 1)
      }
    } catch {}
  }
  const parent = path.dirname(abs)
  return parent === abs ? abs : path.join(landingPath(parent, depth), path.basename(abs))
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex")

const hashPath = (abs: string): string | null => {
  try {
    const st = fs.statSync(abs)
    if (st.isDirectory()) {
      const listing = fs
        .readdirSync(abs, { withFileTypes: true })
        .map((d) => (d.isDirectory() ? `${d.name}/` : d.name))
        .sort()
      return sha256(listing.join("\n"))
    }
    return sha256(fs.readFileSync(abs))
  } catch {
    return null
  }
}

/** A workspace rooted at the real path of `root`. */
export const make = (root: string): Effect.Effect<Workspace.Service, InvalidRoot> =>
  Effect.gen(function* () {
    const given = Workspace.normalize(path.resolve(root))
    const realRoot = yield* Effect.try({
      try: () => {
        const real = fs.realpathSync(given)
        if (!fs.statSync(real).isDirectory()) throw new Error("not a directory")
        return real
      },
      catch: (e) =>
        new InvalidRoot({
          root,
          reason: errCode(e) === "ENOENT" ? "it does not exist" : (e as Error).message
        })
    })

    const toInside = (p: string): string => {
      // absolute paths written against the root as given (not its real path) are accepted too
      if (p.startsWith("/") && given !== realRoot && isInside(given, Workspace.normalize(p))) {
        const n = Workspace.normalize(p)
        return realRoot + n.slice(given.length)
      }
      return p
    }

    const resolve = (p: string): Effect.Effect<string, Workspace.PathEscape> =>
      Effect.flatMap(Workspace.resolveLexical(realRoot, toInside(p)), (abs) =>
        Effect.suspend(() => {
          const reason = symlinkEscape(realRoot, abs)
          return reason === undefined
            ? Effect.succeed(abs)
            : Effect.fail(new Workspace.PathEscape({ path: p, root: realRoot, reason }))
        })
      )

    const relative = (absolute: string) => Workspace.relativeTo(realRoot, toInside(absolute))

    const fingerprint = (paths: ReadonlyArray<string>) =>
      Effect.forEach(paths, (p) =>
        resolve(p).pipe(
          Effect.map((abs) => [p, hashPath(abs)] as const),
          Effect.orElseSucceed(() => [p, null] as const)
        )
      ).pipe(Effect.map((entries) => Object.fromEntries(entries) as Record<string, string | null>))

    const read = (p: string) =>
      Effect.flatMap(resolve(p), (abs) =>
        Effect.sync(() => {
          try {
            const st = fs.statSync(abs)
            return st.isFile() ? new Uint8Array(fs.readFileSync(abs)) : null
          } catch {
            return null
          }
        })
      )

    const restore = (p: string, bytes: Uint8Array | null) =>
      Effect.flatMap(resolve(p), (abs) =>
        Effect.sync(() => {
          try {
            if (bytes === null) {
              if (fs.existsSync(abs) && !fs.statSync(abs).isFile()) return false
              fs.rmSync(abs, { force: true })
              return true
            }
            fs.mkdirSync(path.dirname(abs), { recursive: true })
            const tmp = `${abs}.muse-restore-${process.pid}`
            fs.writeFileSync(tmp, bytes)
            fs.renameSync(tmp, abs)
            return true
          } catch {
            return false
          }
        })
      )

    const real = (p: string) =>
      Effect.map(resolve(p), (abs) => Workspace.relativeTo(realRoot, Workspace.normalize(landingPath(abs))))

    const discardPartial = (paths: ReadonlyArray<string>) =>
      Effect.forEach(
        paths,
        (p) =>
          resolve(p).pipe(
            Effect.flatMap((abs) => Effect.promise(() => removeLeftovers(abs))),
            Effect.ignore
          ),
        { discard: true }
      )

    return {
      root: realRoot,
      resolve,
      relative,
      fingerprint,
      read,
      restore,
      real,
      discardPartial
    } satisfies Workspace.Service
  })

/** `Workspace` rooted at `root` (its real path). */
export const layer = (root: string): Layer.Layer<Workspace.Workspace, InvalidRoot> =>
  Layer.effect(Workspace.Workspace, make(root))
