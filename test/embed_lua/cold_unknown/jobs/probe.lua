-- layout: job. Reaches a name no header defines through `cold`: refused.
return cold.nowhere(1)
