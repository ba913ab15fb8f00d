import type { LanguageModel } from "@effect/ai"
import type { HttpClient } from "@effect/platform"
import * as HttpPolicy from "../HttpPolicy.js"
import type { Options, Resolved } from "../Models.js"
import type { ErrorContext } from "./errors.js"
import { wrap } from "./wrap.js"

const isLoopback = (url: string) => {
  try {
    const host = new URL(url).hostname
    return host === "localhost" || host === "::1" || host === "[::1]" || host.startsWith("127.")
  } catch {
    return false
  }
}

/** What every provider module needs to build its model: the client transform, the request fields, the wrapper. */
export const prepare = (r: Resolved, options: Options) => {
  const policy = HttpPolicy.transformClient(options)
  const extra = options.transformClient
  const transform = (client: HttpClient.HttpClient) => policy(extra ? extra(client) : client)
  const context: ErrorContext = {
    provider: r.provider.name,
    label: r.provider.label,
    model: r.model,
    baseUrl: r.baseUrl,
    local: r.provider.local || isLoopback(r.baseUrl),
    apiKeyVariable: r.apiKeyVariable === "option" ? undefined : r.apiKeyVariable,
    apiKeyHint: r.provider.apiKeyEnv[0]!,
    maxRetries: Math.max(0, Math.floor(options.maxRetries ?? HttpPolicy.defaults.maxRetries))
  }
  return {
    transform,
    /** A fresh copy of the request fields, to add the provider's own to. */
    config: { ...options.config } as Record<string, unknown>,
    finish: (inner: LanguageModel.Service): LanguageModel.Service => wrap(r.provider.api, context, inner)
  }
}

export { isLoopback }
