-- Argo CD health check for ohmlab.fr/VaultSeed.
-- Install as resource.customizations.health.ohmlab.fr_VaultSeed in argocd-cm (see the chart's
-- README, "Argo CD").
--
--   Progressing  no status yet, or the controller has not finished a reconcile of the current
--                generation (status.observedGeneration != metadata.generation), or it waits
--                (Reconciling, RefPending, BackendUnavailable, ...)
--   Degraded     Stalled=True: the controller cannot go on as declared (InvalidSpec, RefCycle,
--                Forbidden delete, ...); it fails the sync
--   Healthy      Ready=True, or Ready=False with reason ObserveOnly (observe-only mode would
--                change the path: the object is reconciled, nothing is written)
local hs = {}

local function condition(conditions, type)
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local function describe(c)
  local reason = c.reason or c.type
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to reconcile the object"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed ~= generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to reconcile generation " .. tostring(generation)
  return hs
end

local conditions = obj.status.conditions
local stalled = condition(conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

local ready = condition(conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
if ready ~= nil and ready.reason == "ObserveOnly" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end

hs.status = "Progressing"
local reconciling = condition(conditions, "Reconciling")
if ready ~= nil then
  hs.message = describe(ready)
elseif reconciling ~= nil and reconciling.status == "True" then
  hs.message = describe(reconciling)
else
  hs.message = "Waiting for the Ready condition"
end
return hs
