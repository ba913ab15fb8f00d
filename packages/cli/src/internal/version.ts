import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

declare const __MUSE_VERSION__: string | undefined

/** The package version (inlined by the build; read from package.json when run from source). */
export const version = (): string => {
  if (typeof __MUSE_VERSION__ === "string") return __MUSE_VERSION__
  try {
    return JSON.parse(fs.readFileSync(fileURLToPath(new URL("../../package.json", import.meta.url)), "utf8")).version
  } catch {
    return "0.0.0"
  }
}
